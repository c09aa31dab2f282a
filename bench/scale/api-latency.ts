/**
 * The API's hot requests against the generated data: latency percentiles of sequential calls
 * through the Hono app (auth, validation, queries, presenters; no network), and the EXPLAIN of
 * every statement each request sends, checked for an index path on the large tables.
 */
import { sql } from 'drizzle-orm';
import type postgres from 'postgres';
import { queryRows, type Database } from '../../src/db/client.ts';
import { percentiles, type Percentiles } from '../lib/stats.ts';

/** One kind of request, with the calls to make: `next(i)` gives the i-th call's method, path and body. */
export interface Target {
  name: string;
  next(i: number): { method: string; path: string; body?: unknown; token: string };
  expectStatus: number;
}

/** A request runner: the app's `request`, returning the status. */
export type Requester = (method: string, path: string, token: string, body?: unknown) => Promise<number>;

/** A plan node that matters for the index-path check. */
interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/** The tables that grow with traffic: a sequential scan of one of them is a finding. */
const LARGE_TABLES = new Set(['events', 'deliveries', 'delivery_attempts']);

/** What one statement's plan does: its scans, in plan order. */
export interface StatementPlan {
  statement: string;
  scans: string[];
  indexPath: boolean;
  executionMs?: number;
}

function scansOf(node: PlanNode, out: string[] = []): string[] {
  if (node['Relation Name']) out.push(`${node['Node Type']} on ${node['Relation Name']}${node['Index Name'] ? ` using ${node['Index Name']}` : ''}`);
  else if (node['Index Name']) out.push(`${node['Node Type']} using ${node['Index Name']}`);
  for (const child of node.Plans ?? []) scansOf(child, out);
  return out;
}

/**
 * EXPLAINs a statement as the query builder sent it: with ANALYZE for reads (the measured
 * time included), without for writes (so nothing is written twice).
 */
export async function explain(client: postgres.Sql, statement: string, params: unknown[]): Promise<StatementPlan> {
  const isRead = /^\s*select/i.test(statement);
  const rows = await client.unsafe(`explain (${isRead ? 'analyze, buffers, ' : ''}format json) ${statement}`, params as postgres.ParameterOrJSON<never>[]);
  const [document] = (rows[0] as unknown as { 'QUERY PLAN': Array<{ Plan: PlanNode; 'Execution Time'?: number }> })['QUERY PLAN'];
  const scans = scansOf(document!.Plan);
  return {
    statement: statement.replace(/\s+/g, ' ').slice(0, 160),
    scans,
    indexPath: !scans.some((scan) => /^Seq Scan on (\w+)/.test(scan) && LARGE_TABLES.has(/^Seq Scan on (\w+)/.exec(scan)![1]!)),
    ...(document!['Execution Time'] !== undefined && { executionMs: Math.round(document!['Execution Time']! * 100) / 100 }),
  };
}

/** A target's figures. */
export interface TargetResult {
  name: string;
  requests: number;
  latency_ms: Percentiles;
  plans: StatementPlan[];
}

/**
 * Runs `requests` calls of each target one after the other (after 5 unmeasured), then one more
 * with statement capture on, and EXPLAINs what that one sent.
 */
export async function measureTargets(
  targets: Target[],
  requests: number,
  request: Requester,
  capture: { start(): void; stop(): Array<{ query: string; params: unknown[] }> },
  explainClient: postgres.Sql,
): Promise<TargetResult[]> {
  const results: TargetResult[] = [];
  for (const target of targets) {
    const call = async (i: number) => {
      const { method, path, body, token } = target.next(i);
      const status = await request(method, path, token, body);
      if (status !== target.expectStatus) throw new Error(`${target.name}: ${method} ${path} answered ${status}, expected ${target.expectStatus}`);
    };
    for (let i = 0; i < 5; i += 1) await call(i);
    const latencies: number[] = [];
    for (let i = 0; i < requests; i += 1) {
      const started = performance.now();
      await call(i);
      latencies.push(performance.now() - started);
    }
    capture.start();
    await call(requests);
    const statements = capture.stop();
    const plans: StatementPlan[] = [];
    for (const { query, params } of statements) plans.push(await explain(explainClient, query, params));
    results.push({ name: target.name, requests, latency_ms: percentiles(latencies), plans });
  }
  return results;
}

/** Samples the generated data needs for the targets: the largest webhook, an ordinary one, delivery ids, deep cursors. */
export async function sampleData(db: Database, projectId: string) {
  const webhooks = await queryRows<{ id: string; deliveries: number }>(
    db,
    sql`select webhook_id as id, count(*)::int as deliveries from deliveries
        where webhook_id in (select id from webhooks where project_id = ${projectId} order by id limit 3)
        group by webhook_id order by deliveries desc`,
  );
  const [largest, ordinary] = [webhooks[0]!, webhooks.at(-1)!];
  const cursorsOf = async (webhookId: string, count: number) => {
    const cursors: string[] = [];
    for (let i = 0; i < 10; i += 1) {
      const offset = Math.floor(((i + 0.5) / 10) * count);
      const [row] = await queryRows<{ id: string }>(
        db,
        sql`select id from deliveries where webhook_id = ${webhookId} order by id desc offset ${offset} limit 1`,
      );
      if (row) cursors.push(row.id);
    }
    return cursors;
  };
  const deliveries = await queryRows<{ id: string; webhook_id: string }>(
    db,
    sql`select id, webhook_id from deliveries where webhook_id in (${largest.id}, ${ordinary.id}) order by md5(id) limit 200`,
  );
  const projectWebhooks = await queryRows<{ id: string }>(db, sql`select id from webhooks where project_id = ${projectId} order by id`);
  return {
    largest,
    ordinary,
    deepCursors: await cursorsOf(largest.id, largest.deliveries),
    deliveries,
    webhookIds: projectWebhooks.map((row) => row.id),
  };
}
