/** Where the customer portal is served. */
export const PORTAL_BASE = '/portal';

/** The address of a minted portal link: opening it once starts the browser session. */
export function portalLinkUrl(origin: string, token: string): string {
  return `${origin.replace(/\/$/, '')}${PORTAL_BASE}/enter?token=${encodeURIComponent(token)}`;
}
