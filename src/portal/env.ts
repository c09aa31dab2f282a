import type { AppEnv } from '../api/env.ts';
import type { PortalSessionRow } from '../db/schema.ts';

/** Hono environment of the portal: the API's, plus the browser session. */
export interface PortalEnv {
  Bindings: AppEnv['Bindings'];
  Variables: AppEnv['Variables'] & {
    session: PortalSessionRow;
    /** Sent back in every form; checked on every change. */
    csrfToken: string;
    /** The posted form of a change, read once by the session check. */
    form: Record<string, string | File | (string | File)[]>;
  };
}
