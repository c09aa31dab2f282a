import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { alertRules, alertTestCases, OPERATORS_DOC, promtool } from './files.ts';

/** GitHub's anchor for a Markdown heading. */
function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replaceAll(/[^\p{L}\p{N}\s_-]/gu, '')
    .replaceAll(/\s/g, '-');
}

/** The `### …` headings under `## <section>` of a Markdown text. */
function subheadingsOf(markdown: string, section: string): string[] {
  const start = markdown.indexOf(`\n## ${section}\n`);
  if (start === -1) return [];
  const rest = markdown.slice(start + 1);
  const end = rest.indexOf('\n## ', 1);
  const body = end === -1 ? rest : rest.slice(0, end);
  return [...body.matchAll(/^### (.+)$/gm)].map((match) => match[1]!);
}

describe('the Prometheus config of the compose topology', () => {
  it('passes promtool check config, with the rule files it loads', () => {
    const run = promtool(['check', 'config', 'prometheus.yml']);
    expect(run.output).toContain('SUCCESS: prometheus.yml is valid prometheus config file syntax');
    expect(run.output).toMatch(/SUCCESS: 1 rule files found/);
    expect(run.status, run.output).toBe(0);
  });
});

describe('the alert rules', () => {
  const rules = alertRules();

  it('pass promtool check rules', () => {
    const run = promtool(['check', 'rules', 'alerts.yml']);
    expect(run.output).toContain(`SUCCESS: ${rules.length} rules found`);
    expect(run.status, run.output).toBe(0);
  });

  it('pass their unit tests (promtool test rules alerts.test.yml)', () => {
    const run = promtool(['test', 'rules', 'alerts.test.yml']);
    expect(run.output).toContain('SUCCESS');
    expect(run.status, run.output).toBe(0);
  });

  it('are each unit-tested firing on a series that should fire them and silent on a healthy one', () => {
    const cases = alertTestCases();
    const names = rules.map((rule) => rule.alert);
    expect(new Set(names).size).toBe(names.length);
    expect(cases.map((item) => item.alertname).filter((name) => !names.includes(name))).toEqual([]);
    const untested = names.flatMap((name) => {
      const own = cases.filter((item) => item.alertname === name);
      return [
        ...(own.some((item) => item.firing > 0) ? [] : [`${name}: no case where it fires`]),
        ...(own.some((item) => item.firing === 0) ? [] : [`${name}: no case where it stays silent`]),
      ];
    });
    expect(untested).toEqual([]);
    const healthy = cases.filter((item) => item.group === 'a healthy installation under load fires nothing');
    expect(healthy.map((item) => item.alertname).sort()).toEqual([...names].sort());
    expect(healthy.every((item) => item.firing === 0)).toBe(true);
  });

  it('give every alert a severity, a summary, a description and a runbook_url to its own section of docs/operators.md', () => {
    const runbooks = subheadingsOf(readFileSync(OPERATORS_DOC, 'utf8'), 'Alert runbooks');
    const anchors = new Set(runbooks.map(headingAnchor));
    for (const rule of rules) {
      expect(['critical', 'warning'], rule.alert).toContain(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
      expect(rule.annotations.description, rule.alert).toBeTruthy();
      expect(rule.annotations.runbook_url, rule.alert).toBe(`docs/operators.md#${headingAnchor(rule.alert)}`);
      expect(anchors.has(headingAnchor(rule.alert)), `docs/operators.md has no runbook section "### ${rule.alert}"`).toBe(true);
    }
    expect(runbooks.filter((heading) => !rules.some((rule) => rule.alert === heading))).toEqual([]);
  });
});
