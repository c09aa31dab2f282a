CREATE TABLE "publish_quotas" (
	"project_id" text PRIMARY KEY NOT NULL,
	"next_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "selection_cursor" text;--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "selection_complete" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "project_limits" ADD COLUMN "publish_rate" double precision;--> statement-breakpoint
ALTER TABLE "project_limits" ADD COLUMN "publish_burst" integer;--> statement-breakpoint
ALTER TABLE "project_limits" ADD COLUMN "max_webhooks" integer;--> statement-breakpoint
CREATE INDEX "operations_running_idx" ON "operations" USING btree ("project_id","webhook_id") WHERE "operations"."status" = 'running';--> statement-breakpoint
ALTER TABLE "project_limits" ADD CONSTRAINT "project_limits_publish_rate_check" CHECK ("project_limits"."publish_rate" is null or ("project_limits"."publish_rate" >= 0.01 and "project_limits"."publish_rate" <= 100000));--> statement-breakpoint
ALTER TABLE "project_limits" ADD CONSTRAINT "project_limits_publish_burst_check" CHECK ("project_limits"."publish_burst" is null or "project_limits"."publish_burst" between 1 and 1000000);--> statement-breakpoint
ALTER TABLE "project_limits" ADD CONSTRAINT "project_limits_max_webhooks_check" CHECK ("project_limits"."max_webhooks" is null or "project_limits"."max_webhooks" between 1 and 1000000);