import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { ensurePromtool } from '../../scripts/promtool.mjs';

/*
 * The observability files (deploy/observability) as the tests read them, and promtool, the
 * pinned build of scripts/promtool.mjs, which checks them and parses their PromQL.
 */

export const PROMETHEUS_DIR = fileURLToPath(new URL('../../deploy/observability/prometheus/', import.meta.url));
export const DASHBOARD_FILE = fileURLToPath(new URL('../../deploy/observability/grafana/dashboards/webhook-delivery.json', import.meta.url));
export const OPERATORS_DOC = fileURLToPath(new URL('../../docs/operators.md', import.meta.url));

/** One PromQL expression and where it is used. */
export interface Query {
  where: string;
  expr: string;
}

/** The output of one promtool run. */
export interface PromtoolRun {
  status: number | null;
  output: string;
}

/** Runs promtool with `args` in `cwd` (deploy/observability/prometheus by default). */
export function promtool(args: string[], cwd = PROMETHEUS_DIR): PromtoolRun {
  const result = spawnSync(ensurePromtool(), args, { cwd, encoding: 'utf8' });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

/** An alerting rule of alerts.yml. */
export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export function alertRules(): AlertRule[] {
  const file = parse(readFileSync(`${PROMETHEUS_DIR}alerts.yml`, 'utf8')) as { groups: { rules: AlertRule[] }[] };
  return file.groups.flatMap((group) => group.rules);
}

/** A test case of alerts.test.yml: at `eval_time`, `alertname` fires with these alerts (none: silent). */
export interface AlertTestCase {
  group: string;
  alertname: string;
  firing: number;
}

export function alertTestCases(): AlertTestCase[] {
  const file = parse(readFileSync(`${PROMETHEUS_DIR}alerts.test.yml`, 'utf8')) as {
    tests: { name: string; alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
  };
  return file.tests.flatMap((test) =>
    (test.alert_rule_test ?? []).map((item) => ({ group: test.name, alertname: item.alertname, firing: item.exp_alerts?.length ?? 0 })),
  );
}

/** A panel of the dashboard, rows' nested panels included. */
export interface Panel {
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string } | string | null;
  targets?: { refId: string; expr?: string; datasource?: { type?: string; uid?: string } | string | null }[];
  panels?: Panel[];
}

export interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  templating: { list: { name: string; type: string; query?: unknown }[] };
  panels: Panel[];
}

export function dashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;
}

/** Every panel of the dashboard, rows and the panels of collapsed rows included. */
export function allPanels(board: Dashboard = dashboard()): Panel[] {
  return board.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]);
}

/**
 * Grafana's interval variables, as a PromQL duration for parsing: the expressions are the
 * dashboard's, the durations those Grafana would put in.
 */
function withGrafanaIntervals(expr: string): string {
  return expr.replaceAll(/\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}/g, '5m');
}

/** Every query of the dashboard's panels, Grafana's interval variables replaced by a duration. */
export function dashboardQueries(): Query[] {
  return allPanels()
    .flatMap((panel) => (panel.targets ?? []).map((target) => ({ where: `panel "${panel.title}" ${target.refId}`, expr: target.expr })))
    .filter((query): query is Query => typeof query.expr === 'string')
    .map((query) => ({ ...query, expr: withGrafanaIntervals(query.expr) }));
}

/** Every query of the dashboard's panels and of the alert rules. */
export function allQueries(): Query[] {
  return [...dashboardQueries(), ...alertRules().map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr }))];
}

/** A label no query uses, set on every selector so that each one is printed with braces. */
const MARKER_LABEL = '__selector_marker__';

/**
 * The metric names an expression selects. Prometheus's own parser reads it (promtool's
 * `promql label-matchers set`, which fails on an expression that does not parse) and prints it
 * back with a marker label added to every vector selector; every selector is then `name{…}` and
 * nothing else in PromQL is an identifier followed by `{`, so the names are read off the
 * printed text once string literals are blanked. A selector without a metric name
 * (`{__name__=~"…"}`) is refused: the check below could not tell what it reads.
 */
export function metricNamesOf(expr: string): string[] {
  let names = namesByExpression.get(expr);
  if (!names) {
    names = parsedMetricNames(expr);
    namesByExpression.set(expr, names);
  }
  return names;
}

const namesByExpression = new Map<string, string[]>();

function parsedMetricNames(expr: string): string[] {
  const run = promtool(['--experimental', 'promql', 'label-matchers', 'set', expr, MARKER_LABEL, 'x']);
  if (run.status !== 0) throw new Error(`promtool does not parse ${JSON.stringify(expr)}:\n${run.output}`);
  const printed = run.output.replaceAll(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  const selectors = [...printed.matchAll(/([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{/g)];
  const unnamed = selectors.filter((match) => match[1] === undefined);
  if (unnamed.length > 0) throw new Error(`${expr} has a selector without a metric name: ${printed}`);
  return [...new Set(selectors.map((match) => match[1]!))];
}
