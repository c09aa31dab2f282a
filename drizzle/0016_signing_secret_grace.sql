ALTER TABLE "webhooks" ADD COLUMN "previous_secret_sealed" text;--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "previous_secret_expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "standard_webhooks" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX "webhooks_previous_secret_expiry_idx" ON "webhooks" USING btree ("previous_secret_expires_at") WHERE "webhooks"."previous_secret_expires_at" is not null;--> statement-breakpoint
ALTER TABLE "webhooks" ADD CONSTRAINT "webhooks_previous_secret_check" CHECK (("webhooks"."previous_secret_sealed" is null) = ("webhooks"."previous_secret_expires_at" is null));