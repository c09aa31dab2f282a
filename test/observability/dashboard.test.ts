import { describe, expect, it } from 'vitest';
import { allPanels, allQueries, dashboard, dashboardQueries, metricNamesOf } from './files.ts';

/** Every `datasource` reference anywhere in a JSON value. */
function datasourceReferences(value: unknown): unknown[] {
  if (Array.isArray(value)) return value.flatMap(datasourceReferences);
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, inner]) =>
    key === 'datasource' ? [inner, ...datasourceReferences(inner)] : datasourceReferences(inner),
  );
}

describe('the Grafana dashboard', () => {
  const board = dashboard();
  const panels = allPanels(board).filter((panel) => panel.type !== 'row');

  it('is a classic dashboard JSON of a current Grafana (schema 41 and later: Grafana 12 and 13)', () => {
    expect(board.uid).toMatch(/^[a-z0-9-]{1,40}$/);
    expect(board.title).toBeTruthy();
    expect(board.schemaVersion).toBeGreaterThanOrEqual(41);
  });

  it('asks for its Prometheus data source with a `datasource` variable and names no data source uid of its own', () => {
    expect(board.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));
    const references = datasourceReferences(board);
    expect(references.length).toBeGreaterThan(panels.length);
    for (const reference of references) expect(reference).toEqual({ type: 'prometheus', uid: '${datasource}' });
  });

  it('gives every panel a title, a description and at least one query', () => {
    for (const panel of panels) {
      expect(panel.title).toBeTruthy();
      expect((panel as { description?: string }).description, panel.title).toBeTruthy();
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
    }
  });

  it('has queries that Prometheus parses, each selecting at least one metric by name', () => {
    for (const query of allQueries()) {
      expect(metricNamesOf(query.expr), query.where).not.toEqual([]);
    }
  });

  it('shows publishing, deliveries, latency, attempts, dead letters, auto-disabled endpoints, open breakers, worker slots and schedule-to-start latency', () => {
    const shown = new Set(dashboardQueries().flatMap((query) => metricNamesOf(query.expr)));
    expect([...shown]).toEqual(
      expect.arrayContaining([
        'webhook_events_accepted_total',
        'webhook_deliveries_finished_total',
        'webhook_publish_to_delivered_seconds_bucket',
        'webhook_delivery_attempts_total',
        'webhook_auto_disabled_total',
        'webhook_circuit_breakers_open',
        'temporal_worker_task_slots_used',
        'temporal_worker_task_slots_available',
        'temporal_activity_schedule_to_start_latency_bucket',
        'temporal_workflow_task_schedule_to_start_latency_bucket',
      ]),
    );
  });
});

describe('reading metric names out of PromQL with promtool', () => {
  it('finds the selected metrics, not functions, aggregations, labels, keywords, durations or label values', () => {
    expect(
      metricNamesOf(
        'histogram_quantile(0.95, sum by (le, outcome) (rate(webhook_delivery_attempt_duration_seconds_bucket{outcome=~"5xx|timeout", route="rate(x)"}[5m] offset 1h)))' +
          ' / on (outcome) group_left (job) max without (instance) (up) and absent(webhook_database_up == 0) unless count_values("value", http_requests_total) > bool 2',
      ).sort(),
    ).toEqual(['http_requests_total', 'up', 'webhook_database_up', 'webhook_delivery_attempt_duration_seconds_bucket']);
  });

  it('refuses an expression that does not parse, and a selector without a metric name', () => {
    expect(() => metricNamesOf('sum(rate(webhook_events_accepted_total[5m])')).toThrow(/does not parse/);
    expect(() => metricNamesOf('{__name__=~"webhook_.+"}')).toThrow(/without a metric name/);
  });
});
