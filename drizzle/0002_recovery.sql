CREATE TABLE "operation_deliveries" (
	"operation_id" text NOT NULL,
	"delivery_id" text NOT NULL,
	"state" text NOT NULL,
	CONSTRAINT "operation_deliveries_operation_id_delivery_id_pk" PRIMARY KEY("operation_id","delivery_id")
);
--> statement-breakpoint
CREATE TABLE "operations" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"webhook_id" text NOT NULL,
	"statuses" text[] NOT NULL,
	"since" timestamp with time zone,
	"until" timestamp with time zone NOT NULL,
	"status" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"finished_at" timestamp with time zone,
	CONSTRAINT "operations_status_check" CHECK ("operations"."status" in ('running', 'completed', 'cancelled', 'failed'))
);
--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "failing_since" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "disabled_reason" text;--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "disabled_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "operation_deliveries" ADD CONSTRAINT "operation_deliveries_operation_id_operations_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_deliveries" ADD CONSTRAINT "operation_deliveries_delivery_id_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operations" ADD CONSTRAINT "operations_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "operation_deliveries_delivery_idx" ON "operation_deliveries" USING btree ("delivery_id");--> statement-breakpoint
CREATE INDEX "operations_webhook_idx" ON "operations" USING btree ("webhook_id","id");