import { defineConfig } from 'drizzle-kit';

// `npm run db:generate` writes migrations from the schema; DATABASE_URL is only needed by
// drizzle-kit's online commands (studio, check against a live database).
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema.ts',
  out: './drizzle',
  dbCredentials: { url: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5433/postgres' },
});
