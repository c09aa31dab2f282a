CREATE TABLE "send_permits" (
	"delivery_id" text PRIMARY KEY NOT NULL,
	"webhook_id" text NOT NULL,
	"state" text NOT NULL,
	"queued_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone,
	"not_before" timestamp with time zone,
	CONSTRAINT "send_permits_state_check" CHECK ("send_permits"."state" in ('held', 'waiting'))
);
--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "rate_limit" double precision;--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "rate_next_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "consecutive_failures" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "circuit_opened_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "send_permits" ADD CONSTRAINT "send_permits_delivery_id_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "send_permits" ADD CONSTRAINT "send_permits_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "send_permits_webhook_idx" ON "send_permits" USING btree ("webhook_id","state","queued_at");--> statement-breakpoint
ALTER TABLE "webhooks" ADD CONSTRAINT "webhooks_rate_limit_check" CHECK ("webhooks"."rate_limit" is null or "webhooks"."rate_limit" > 0);