import { Hono } from 'hono';
import { answered, portalApi, type AppFetch } from '../api.ts';
import type { PortalEnv } from '../env.ts';
import { PORTAL_BASE } from '../link.ts';
import { formValues, pageSession, redirectAfterChange, render } from '../pages.ts';
import type { RETRYABLE_DELIVERY_STATUSES } from '../../db/schema.ts';
import { deliveryDetail, deliveryPath, operationDetail, operationPath } from '../views/deliveries.ts';
import { webhookPath } from '../views/webhooks.ts';

/** Breadcrumbs down to a webhook's page. */
const toWebhook = (id: string, url: string) => [
  { href: PORTAL_BASE, label: 'Webhooks' },
  { href: webhookPath(id), label: url },
];

/** The portal's delivery pages: a delivery with its attempts and retry, and bulk retries with their progress. */
export function deliveryPages(appFetch: AppFetch) {
  return new Hono<PortalEnv>()
    .get('/webhooks/:id/deliveries/:deliveryId', async (c) => {
      const { id, deliveryId } = c.req.param();
      const api = portalApi(c, appFetch);
      const path = { id, delivery_id: deliveryId };
      const [{ data: webhook }, { data: delivery }, { data: attempts }] = await Promise.all([
        answered(api.GET('/api-gateway/v2/webhooks/{id}', { params: { path: { id } } })),
        answered(api.GET('/api-gateway/v2/webhooks/{id}/deliveries/{delivery_id}', { params: { path } })),
        answered(api.GET('/api-gateway/v2/webhooks/{id}/deliveries/{delivery_id}/attempts', { params: { path } })),
      ]);
      return render(c, { title: `Delivery ${delivery.id}`, breadcrumbs: toWebhook(id, webhook.url) }, deliveryDetail(pageSession(c), id, delivery, attempts));
    })
    .post('/webhooks/:id/deliveries/:deliveryId/retry', async (c) => {
      const { id, deliveryId } = c.req.param();
      await answered(portalApi(c, appFetch).POST('/api-gateway/v2/webhooks/{id}/deliveries/{delivery_id}/retry', { params: { path: { id, delivery_id: deliveryId } } }));
      return redirectAfterChange(c, deliveryPath(id, deliveryId), 'retried');
    })
    .post('/webhooks/:id/deliveries/retry', async (c) => {
      const id = c.req.param('id');
      // The API refuses an unknown status with its own message; an empty choice is its 400 too.
      const status = formValues(c, 'status') as (typeof RETRYABLE_DELIVERY_STATUSES)[number][];
      const { data } = await answered(
        portalApi(c, appFetch).POST('/api-gateway/v2/webhooks/{id}/deliveries/retry', { params: { path: { id } }, body: { status } }),
      );
      return redirectAfterChange(c, operationPath(id, data.id));
    })
    .get('/webhooks/:id/operations/:operationId', async (c) => {
      const { id, operationId } = c.req.param();
      const api = portalApi(c, appFetch);
      const [{ data: webhook }, { data: operation }] = await Promise.all([
        answered(api.GET('/api-gateway/v2/webhooks/{id}', { params: { path: { id } } })),
        answered(api.GET('/api-gateway/v2/webhooks/{id}/operations/{operation_id}', { params: { path: { id, operation_id: operationId } } })),
      ]);
      return render(c, { title: 'Bulk retry', breadcrumbs: toWebhook(id, webhook.url) }, operationDetail(pageSession(c), id, operation));
    })
    .post('/webhooks/:id/operations/:operationId/cancel', async (c) => {
      const { id, operationId } = c.req.param();
      await answered(portalApi(c, appFetch).DELETE('/api-gateway/v2/webhooks/{id}/operations/{operation_id}', { params: { path: { id, operation_id: operationId } } }));
      return redirectAfterChange(c, operationPath(id, operationId), 'cancelled');
    });
}
