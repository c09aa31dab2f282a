/**
 * The benchmark's event producer: `docauth.completed` events through the producers' door
 * (`POST /internal/v1/events`), spread round robin over the API replicas as a load balancer
 * would, on kept-alive connections.
 */
import { Agent, request } from 'node:http';
import { docauthData } from '../../test/support/event-data.ts';

export interface PublishResult {
  status: number;
  deliveryIds: string[];
  error?: string;
  /** The Retry-After header of a refusal (429), when it had one. */
  retryAfter?: string;
}

export interface EventPublisher {
  /** Publishes event `seq` with the producer id `<idPrefix>-<seq>`. */
  publish(seq: number, idPrefix: string): Promise<PublishResult>;
  close(): void;
}

/** A publisher for `projectId` with its producer key, on at most `maxSockets` kept-alive connections per API replica. */
export function createPublisher(apiUrls: readonly string[], producerKey: string, projectId: string, maxSockets: number): EventPublisher {
  const agent = new Agent({ keepAlive: true, maxSockets });
  const eventsUrls = apiUrls.map((url) => new URL('/internal/v1/events', url));
  const headers = { Authorization: `Bearer ${producerKey}`, 'Content-Type': 'application/json' };
  return {
    publish: (seq, idPrefix) =>
      new Promise((resolve) => {
        const body = JSON.stringify({
          id: `${idPrefix}-${seq}`,
          project_id: projectId,
          event: 'docauth.completed',
          data: docauthData({ request_id: `req_bench_${seq}` }),
        });
        const req = request(
          eventsUrls[seq % eventsUrls.length]!,
          { method: 'POST', agent, headers: { ...headers, 'Content-Length': Buffer.byteLength(body) } },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              if (res.statusCode !== 202) {
                const retryAfter = res.headers['retry-after'];
                resolve({ status: res.statusCode ?? 0, deliveryIds: [], error: `${res.statusCode}: ${text.slice(0, 200)}`, ...(retryAfter ? { retryAfter } : {}) });
                return;
              }
              try {
                const parsed = JSON.parse(text) as { data: { delivery_ids: string[] } };
                resolve({ status: 202, deliveryIds: parsed.data.delivery_ids });
              } catch (error) {
                resolve({ status: 202, deliveryIds: [], error: `unparsable answer: ${String(error)}` });
              }
            });
            res.on('error', (error) => resolve({ status: 0, deliveryIds: [], error: String(error) }));
          },
        );
        req.on('error', (error) => resolve({ status: 0, deliveryIds: [], error: String(error) }));
        req.end(body);
      }),
    close: () => agent.destroy(),
  };
}
