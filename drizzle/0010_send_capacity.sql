CREATE TABLE "destination_limits" (
	"destination" text PRIMARY KEY NOT NULL,
	"max_in_flight" integer,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "destination_limits_max_in_flight_check" CHECK ("destination_limits"."max_in_flight" is null or "destination_limits"."max_in_flight" between 1 and 100000)
);
--> statement-breakpoint
CREATE TABLE "project_limits" (
	"project_id" text PRIMARY KEY NOT NULL,
	"max_in_flight" integer,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "project_limits_max_in_flight_check" CHECK ("project_limits"."max_in_flight" is null or "project_limits"."max_in_flight" between 1 and 100000)
);
--> statement-breakpoint
CREATE TABLE "send_places" (
	"scope" text NOT NULL,
	"slot" integer NOT NULL,
	"delivery_id" text,
	"attempt" text,
	"expires_at" timestamp with time zone DEFAULT '-infinity' NOT NULL,
	"not_before" timestamp with time zone,
	CONSTRAINT "send_places_scope_slot_pk" PRIMARY KEY("scope","slot")
);
--> statement-breakpoint
CREATE TABLE "send_waiters" (
	"delivery_id" text PRIMARY KEY NOT NULL,
	"webhook_id" text NOT NULL,
	"project_id" text NOT NULL,
	"destination" text NOT NULL,
	"seq" bigint GENERATED ALWAYS AS IDENTITY (sequence name "send_waiters_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"blocked" text NOT NULL,
	"blocked_since" timestamp with time zone NOT NULL,
	"woken_until" timestamp with time zone,
	CONSTRAINT "send_waiters_blocked_check" CHECK ("send_waiters"."blocked" in ('webhook', 'project', 'destination'))
);
--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "destination" text GENERATED ALWAYS AS (url_destination(url)) STORED;--> statement-breakpoint
ALTER TABLE "send_places" ADD CONSTRAINT "send_places_delivery_id_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."deliveries"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "send_waiters" ADD CONSTRAINT "send_waiters_delivery_id_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "send_waiters" ADD CONSTRAINT "send_waiters_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "send_places_free_idx" ON "send_places" USING btree ("scope","expires_at");--> statement-breakpoint
CREATE INDEX "send_places_delivery_idx" ON "send_places" USING btree ("delivery_id") WHERE "send_places"."delivery_id" is not null;--> statement-breakpoint
CREATE INDEX "send_waiters_webhook_line_idx" ON "send_waiters" USING btree ("webhook_id","seq");--> statement-breakpoint
CREATE INDEX "send_waiters_project_line_idx" ON "send_waiters" USING btree ("project_id","blocked_since") WHERE "send_waiters"."blocked" = 'project';--> statement-breakpoint
CREATE INDEX "send_waiters_destination_line_idx" ON "send_waiters" USING btree ("destination","blocked_since") WHERE "send_waiters"."blocked" = 'destination';