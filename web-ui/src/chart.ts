// A live line chart drawn with uPlot: a fixed window of samples per series,
// the newest on the right, scaled to the largest value in view.
import { h } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { REFRESH_MS } from './dom';

const HEIGHT = 160;

export interface Series {
  label: string;
  color: string;
}

function niceCeiling(v: number): number {
  const exp = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * exp) return m * exp;
  return 10 * exp;
}

// uPlot's data: x (seconds before now) and one row per series, the newest
// sample at 0.
function toData(values: number[][]): uPlot.AlignedData {
  const n = Math.max(0, ...values.map((v) => v.length));
  const step = REFRESH_MS / 1000;
  const xs = Array.from({ length: n }, (_, i) => (i - (n - 1)) * step);
  return [xs, ...values.map((v) => [...Array(n - v.length).fill(null), ...v])] as uPlot.AlignedData;
}

// `values` holds one list of samples per series (the caller keeps it; the
// overview keeps its charts across page changes); `version` changes whenever
// they do.
export function LiveChart({ title, series, format, capacity = 60, testid, values, version }: {
  title: string;
  series: Series[];
  format: (v: number) => string;
  capacity?: number;
  testid?: string;
  values: number[][];
  version: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const max = Math.max(0, ...values.flat());

  useEffect(() => {
    const el = box.current!;
    const span = (capacity - 1) * (REFRESH_MS / 1000);
    const u = new uPlot({
      width: el.clientWidth || 600,
      height: HEIGHT,
      legend: { show: false },
      cursor: { show: false },
      scales: {
        x: { time: false, range: () => [-span, 0] },
        y: { range: (_u, _min, hi) => [0, hi > 0 ? niceCeiling(hi) : 1] },
      },
      axes: [
        { values: (_u, ticks) => ticks.map((t) => (t === 0 ? 'now' : `${t}s`)), stroke: '#888' },
        { values: (_u, ticks) => ticks.map((t) => format(t)), size: 64, stroke: '#888' },
      ],
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, points: { show: false } }))],
    }, toData(values), el);
    plot.current = u;
    // Resized on the next frame, not inside the observer's callback.
    let frame = 0;
    const resize = new ResizeObserver(() => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        if (el.clientWidth > 0 && el.clientWidth !== u.width) u.setSize({ width: el.clientWidth, height: HEIGHT });
      });
    });
    resize.observe(el);
    return () => {
      cancelAnimationFrame(frame);
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(toData(values));
  }, [version]);

  return h('figure', { class: 'chart', 'data-testid': testid, 'data-max': String(max) },
    h('figcaption', {}, title),
    h('div', { class: 'chart-plot', role: 'img', 'aria-label': title, ref: box }),
    h('div', { class: 'legend' }, series.map((s, i) => {
      const list = values[i] ?? [];
      return h('span', { class: 'legend-item' }, h('i', { style: `background:${s.color}` }), s.label, ' ',
        h('span', { class: 'legend-value' }, list.length ? format(list[list.length - 1]) : '—'));
    })));
}

// Keeps a window of samples per series for a LiveChart.
export function record(history: number[][], sample: number[], capacity: number) {
  sample.forEach((v, i) => {
    history[i] ??= [];
    history[i].push(Number.isFinite(v) ? v : 0);
    if (history[i].length > capacity) history[i].shift();
  });
}
