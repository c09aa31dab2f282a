import { createRoute, z } from '@hono/zod-openapi';
import { mintPortalLink } from '../../db/queries/portal-sessions.ts';
import { portalLinkUrl } from '../../portal/link.ts';
import { envelope } from '../schemas.ts';
import { requireApiKey } from '../auth.ts';
import { createRouter } from '../validation.ts';
import { errorResponses, success } from './shared.ts';

const PortalLinkSchema = z
  .object({
    id: z.string().openapi({ example: 'ps_01jd3k5v8ex6m3s4bq9z7w2y1c' }),
    url: z.string().openapi({
      format: 'uri',
      description: 'Open once, within expires_at, in the browser of the person who manages the webhooks; it becomes a one-hour session',
    }),
    expires_at: z.string().openapi({ format: 'date-time', description: 'Until when the link can be opened' }),
  })
  .openapi('PortalLink');

/** Portal links, mounted at `/portal` of the v2 API: every route behind a customer API key. */
export const portalSessionsRouter = createRouter();
portalSessionsRouter.use('/*', requireApiKey);
portalSessionsRouter.openapi(
  createRoute({
    method: 'post',
    path: '/sessions',
    operationId: 'createPortalSession',
    tags: ['Portal'],
    summary: "Mint a one-time link to the customer portal of the API key's project",
    description:
      'The portal shows the project\'s webhooks and deliveries in a browser and acts as this API key, under the same rules as the API. ' +
      'Hand the link to your customer (redirect their browser to it); it opens once, within ten minutes, and the session ends after an hour or when the key is revoked.',
    responses: {
      201: success(envelope(PortalLinkSchema), 'The link, shown once'),
      ...errorResponses(401, 403),
    },
  }),
  async (c) => {
    const { session, token } = await mintPortalLink(c.var.deps.db, c.var.apiKey);
    c.var.logger.info({ portalSessionId: session.id }, 'portal link minted');
    c.header('Cache-Control', 'no-store');
    return c.json(
      {
        data: {
          id: session.id,
          url: portalLinkUrl(c.var.deps.publicUrl ?? new URL(c.req.url).origin, token),
          expires_at: session.linkExpiresAt.toISOString(),
        },
        message: 'Portal link created. It opens once, within ten minutes.',
        meta: { request_id: c.var.requestId },
      },
      201,
    );
  },
);
