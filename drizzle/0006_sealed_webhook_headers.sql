ALTER TABLE "webhooks" ALTER COLUMN "headers" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks" ADD COLUMN "headers_sealed" text;