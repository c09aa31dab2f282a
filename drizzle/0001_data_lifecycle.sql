ALTER TABLE "events" ALTER COLUMN "payload" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "payload_sealed" text;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "request_id_hash" text;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "erased_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "deliveries_webhook_status_idx" ON "deliveries" USING btree ("webhook_id","status","id");--> statement-breakpoint
CREATE INDEX "deliveries_settled_idx" ON "deliveries" USING btree ("updated_at") WHERE "deliveries"."status" in ('delivered', 'dead_letter');--> statement-breakpoint
CREATE INDEX "events_created_idx" ON "events" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "events_request_id_idx" ON "events" USING btree ("project_id","request_id_hash");