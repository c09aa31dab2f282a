CREATE TABLE "portal_secret_reveals" (
	"session_id" text NOT NULL,
	"webhook_id" text NOT NULL,
	"secret_sealed" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "portal_secret_reveals_session_id_webhook_id_pk" PRIMARY KEY("session_id","webhook_id")
);
--> statement-breakpoint
ALTER TABLE "portal_secret_reveals" ADD CONSTRAINT "portal_secret_reveals_session_id_portal_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."portal_sessions"("id") ON DELETE cascade ON UPDATE no action;