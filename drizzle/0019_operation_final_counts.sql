ALTER TABLE "operations" ADD COLUMN "matched_count" integer;--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "retried_count" integer;--> statement-breakpoint
ALTER TABLE "operations" ADD COLUMN "skipped_count" integer;