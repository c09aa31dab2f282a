/** A small hand-written SVG chart: stacked panels of line series over the run's seconds. */

export interface Series {
  name: string;
  color: string;
  points: [number, number][];
  dash?: string;
  width?: number;
}

export interface Panel {
  title: string;
  yLabel: string;
  series: Series[];
  log?: boolean;
  /** Horizontal reference lines. */
  refs?: { y: number; label: string; color: string }[];
}

export interface ChartSpec {
  title: string;
  /** Lines under the title. */
  subtitle: string[];
  xMax: number;
  /** Vertical markers (seconds), e.g. the end of publishing. */
  markers: { x: number; label: string }[];
  panels: Panel[];
}

const WIDTH = 1000;
const PANEL_HEIGHT = 210;
const MARGIN = { left: 70, right: 170, top: 30, bottom: 28 };
const HEADER_BASE = 40;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function niceStep(range: number, target: number): number {
  const raw = range / Math.max(1, target);
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = raw / power;
  const nice = unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 2.5 ? 2.5 : unit <= 5 ? 5 : 10;
  return nice * power;
}

function fmt(value: number): string {
  if (value >= 10_000) return `${Math.round(value / 1000)}k`;
  if (value >= 1000) return `${(value / 1000).toFixed(1).replace(/\.0$/, '')}k`;
  if (value >= 10 || Number.isInteger(value)) return String(Math.round(value));
  return value.toFixed(1);
}

function renderPanel(panel: Panel, spec: ChartSpec, top: number): string {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom;
  const x0 = MARGIN.left;
  const y0 = top + MARGIN.top;
  const values = panel.series.flatMap((s) => s.points.map((p) => p[1])).filter((v) => Number.isFinite(v));
  for (const ref of panel.refs ?? []) values.push(ref.y);
  const out: string[] = [];
  out.push(`<text x="${x0}" y="${top + 18}" class="title">${esc(panel.title)}</text>`);
  const xMax = Math.max(1, spec.xMax);
  const sx = (x: number) => x0 + (x / xMax) * plotW;

  let sy: (y: number) => number;
  const yTicks: number[] = [];
  if (panel.log) {
    const positive = values.filter((v) => v > 0);
    const lo = 10 ** Math.floor(Math.log10(Math.max(0.1, Math.min(...positive, 1))));
    const hi = 10 ** Math.ceil(Math.log10(Math.max(...positive, 10)));
    const l0 = Math.log10(lo);
    const l1 = Math.log10(hi);
    sy = (y: number) => y0 + plotH - ((Math.log10(Math.max(lo, y)) - l0) / (l1 - l0)) * plotH;
    for (let e = l0; e <= l1; e += 1) yTicks.push(10 ** e);
  } else {
    const hi = Math.max(...values, 1) * 1.08;
    const step = niceStep(hi, 5);
    const top2 = Math.ceil(hi / step) * step;
    sy = (y: number) => y0 + plotH - (y / top2) * plotH;
    for (let v = 0; v <= top2 + step / 2; v += step) yTicks.push(v);
  }

  // grid and axes
  for (const tick of yTicks) {
    const y = sy(tick).toFixed(1);
    out.push(`<line x1="${x0}" y1="${y}" x2="${x0 + plotW}" y2="${y}" class="grid"/>`);
    out.push(`<text x="${x0 - 6}" y="${y}" class="ytick">${fmt(tick)}</text>`);
  }
  const xStep = niceStep(xMax, 10);
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    const px = sx(x).toFixed(1);
    out.push(`<line x1="${px}" y1="${y0}" x2="${px}" y2="${y0 + plotH}" class="grid"/>`);
    out.push(`<text x="${px}" y="${y0 + plotH + 16}" class="xtick">${fmt(x)}</text>`);
  }
  out.push(`<rect x="${x0}" y="${y0}" width="${plotW}" height="${plotH}" class="frame"/>`);
  out.push(
    `<text transform="translate(${x0 - 50},${y0 + plotH / 2}) rotate(-90)" class="ylabel">${esc(panel.yLabel)}</text>`,
  );
  for (const marker of spec.markers) {
    const px = sx(marker.x).toFixed(1);
    out.push(`<line x1="${px}" y1="${y0}" x2="${px}" y2="${y0 + plotH}" class="marker"/>`);
  }
  for (const ref of panel.refs ?? []) {
    const y = sy(ref.y).toFixed(1);
    out.push(`<line x1="${x0}" y1="${y}" x2="${x0 + plotW}" y2="${y}" stroke="${ref.color}" stroke-dasharray="2 4" stroke-width="1.5"/>`);
  }

  // series
  panel.series.forEach((series) => {
    const pts = series.points.filter((p) => Number.isFinite(p[1]) && (!panel.log || p[1] > 0));
    if (pts.length === 0) return;
    const d = pts.map((p, i) => `${i === 0 ? 'M' : 'L'}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join('');
    out.push(
      `<path d="${d}" fill="none" stroke="${series.color}" stroke-width="${series.width ?? 1.8}"${series.dash ? ` stroke-dasharray="${series.dash}"` : ''}/>`,
    );
  });
  // legend
  const legend = [
    ...panel.series.map((s) => ({ label: s.name, color: s.color, dash: s.dash })),
    ...(panel.refs ?? []).map((r) => ({ label: r.label, color: r.color, dash: '2 4' })),
  ];
  legend.forEach((item, i) => {
    const ly = y0 + 8 + i * 17;
    const lx = x0 + plotW + 12;
    out.push(
      `<line x1="${lx}" y1="${ly}" x2="${lx + 22}" y2="${ly}" stroke="${item.color}" stroke-width="2.5"${item.dash ? ` stroke-dasharray="${item.dash}"` : ''}/>`,
    );
    out.push(`<text x="${lx + 28}" y="${ly + 4}" class="legend">${esc(item.label)}</text>`);
  });
  return out.join('\n');
}

export function renderChart(spec: ChartSpec): string {
  const HEADER = HEADER_BASE + spec.subtitle.length * 15;
  const height = HEADER + spec.panels.length * PANEL_HEIGHT + 20;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif">`,
  );
  parts.push(`<style>
  .title { font-size: 13px; font-weight: 600; fill: #222; }
  .head { font-size: 16px; font-weight: 700; fill: #111; }
  .sub { font-size: 11.5px; fill: #555; }
  .grid { stroke: #e6e6e6; stroke-width: 1; }
  .frame { fill: none; stroke: #999; stroke-width: 1; }
  .marker { stroke: #888; stroke-width: 1.2; stroke-dasharray: 5 4; }
  .ytick { font-size: 10.5px; fill: #555; text-anchor: end; dominant-baseline: middle; }
  .xtick { font-size: 10.5px; fill: #555; text-anchor: middle; }
  .ylabel { font-size: 11px; fill: #444; text-anchor: middle; }
  .legend { font-size: 11px; fill: #333; }
</style>`);
  parts.push(`<rect width="100%" height="100%" fill="#fff"/>`);
  parts.push(`<text x="${MARGIN.left}" y="22" class="head">${esc(spec.title)}</text>`);
  spec.subtitle.forEach((line, i) => parts.push(`<text x="${MARGIN.left}" y="${40 + i * 15}" class="sub">${esc(line)}</text>`));
  spec.panels.forEach((panel, i) => parts.push(renderPanel(panel, spec, HEADER + i * PANEL_HEIGHT)));
  const lastBottom = HEADER + spec.panels.length * PANEL_HEIGHT;
  parts.push(
    `<text x="${MARGIN.left + (WIDTH - MARGIN.left - MARGIN.right) / 2}" y="${lastBottom + 8}" class="xtick">seconds since the load started${spec.markers.length ? ' (dashed vertical line: ' + esc(spec.markers.map((m) => m.label).join(', ')) + ')' : ''}</text>`,
  );
  parts.push('</svg>');
  return parts.join('\n');
}
