import { sql } from 'drizzle-orm';
import { queryRows, type Database } from '../client.ts';

/** A delivery left `pending` or `processing` for a while with nothing in the database that explains it. */
export interface StuckDeliveryCandidate {
  deliveryId: string;
  status: 'pending' | 'processing';
  updatedAt: Date;
  webhookId: string;
  projectId: string;
  event: string;
  url: string;
}

/**
 * Deliveries `pending` or `processing` since before `before` that nothing in the database shows
 * on their way: not waiting in a line for places, holding no place (a send in flight, or a start
 * under the rate limit), not queued by a running bulk retry, their event's workflows started.
 * Whether their workflow will move them is for Temporal to say. At most `perProject` of each
 * project, the oldest first, `limit` in all.
 */
export async function listStuckDeliveryCandidates(db: Database, before: Date, limit: number, perProject: number): Promise<StuckDeliveryCandidate[]> {
  const rows = await queryRows<{
    id: string;
    status: 'pending' | 'processing';
    updated_at: string | Date;
    webhook_id: string;
    project_id: string;
    event: string;
    url: string;
  }>(
    db,
    sql`select id, status, updated_at, webhook_id, project_id, event, url from (
          select d.id, d.status, d.updated_at, d.webhook_id, w.project_id, d.event, w.url,
                 row_number() over (partition by w.project_id order by d.updated_at) as rank
          from deliveries d
          join webhooks w on w.id = d.webhook_id
          join events e on e.id = d.event_id
          where d.status in ('pending', 'processing') and d.updated_at < ${before.toISOString()}::timestamptz
            and e.dispatched_at is not null
            and not exists (select 1 from send_waiters sw where sw.delivery_id = d.id)
            and not exists (select 1 from send_places sp where sp.delivery_id = d.id and sp.expires_at >= now())
            and not exists (
              select 1 from operation_deliveries od join operations o on o.id = od.operation_id
              where od.delivery_id = d.id and od.state = 'queued' and o.status = 'running')
        ) candidates
        where rank <= ${perProject}
        order by rank, updated_at
        limit ${limit}`,
  );
  return rows.map((row) => ({
    deliveryId: row.id,
    status: row.status,
    updatedAt: new Date(row.updated_at),
    webhookId: row.webhook_id,
    projectId: row.project_id,
    event: row.event,
    url: row.url,
  }));
}
