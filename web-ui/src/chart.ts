// A live line chart drawn as SVG: a fixed window of samples per series,
// scaled to the largest value in view.
import { h } from './dom';

const NS = 'http://www.w3.org/2000/svg';
const WIDTH = 600;
const HEIGHT = 160;
const PAD_LEFT = 56;
const PAD_BOTTOM = 18;

export interface Series {
  label: string;
  color: string;
}

function svg(tag: string, attrs: Record<string, string | number>): SVGElement {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

export class LiveChart {
  readonly el: HTMLElement;
  private readonly plot: SVGSVGElement;
  private readonly values: number[][];
  private readonly legendValues: HTMLElement[];

  constructor(
    title: string,
    private readonly series: Series[],
    private readonly format: (v: number) => string,
    private readonly capacity = 60,
    testid?: string,
    history?: number[][],
  ) {
    // A caller that keeps `history` gets the samples back when the chart is
    // drawn again (the overview keeps its charts across page changes).
    this.values = history ?? [];
    while (this.values.length < series.length) this.values.push([]);
    this.plot = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'chart-plot', role: 'img' }) as SVGSVGElement;
    this.plot.setAttribute('aria-label', title);
    this.legendValues = series.map(() => h('span', { class: 'legend-value' }, '—'));
    this.el = h(
      'figure',
      { class: 'chart', 'data-testid': testid },
      h('figcaption', {}, title),
      this.plot,
      h('div', { class: 'legend' },
        series.map((s, i) =>
          h('span', { class: 'legend-item' }, h('i', { style: `background:${s.color}` }), s.label, ' ',
            this.legendValues[i]))),
    );
    this.draw();
  }

  // One sample per series, in the order given to the constructor.
  push(sample: number[]) {
    sample.forEach((v, i) => {
      const list = this.values[i];
      list.push(Number.isFinite(v) ? v : 0);
      if (list.length > this.capacity) list.shift();
    });
    this.draw();
  }

  // Draws again, after the caller changed the `history` it passed in.
  redraw() {
    this.draw();
  }

  private draw() {
    this.values.forEach((list, i) => {
      if (list.length) this.legendValues[i].textContent = this.format(list[list.length - 1]);
    });
    const max = Math.max(0, ...this.values.flat());
    this.el.dataset.max = String(max);
    const top = max > 0 ? niceCeiling(max) : 1;
    const plotW = WIDTH - PAD_LEFT - 4;
    const plotH = HEIGHT - PAD_BOTTOM - 8;
    const x = (i: number) => PAD_LEFT + (plotW * i) / Math.max(1, this.capacity - 1);
    const y = (v: number) => 8 + plotH - (plotH * v) / top;
    const parts: SVGElement[] = [];
    for (const frac of [0, 0.5, 1]) {
      const yy = y(top * frac);
      parts.push(svg('line', { x1: PAD_LEFT, x2: WIDTH - 4, y1: yy, y2: yy, class: 'grid' }));
      const label = svg('text', { x: PAD_LEFT - 6, y: yy + 4, 'text-anchor': 'end', class: 'axis' });
      label.textContent = this.format(top * frac);
      parts.push(label);
    }
    const caption = svg('text', { x: WIDTH - 4, y: HEIGHT - 4, 'text-anchor': 'end', class: 'axis' });
    caption.textContent = 'now';
    parts.push(caption);
    this.values.forEach((list, si) => {
      if (list.length === 0) return;
      const offset = this.capacity - list.length;
      const points = list.map((v, i) => `${x(offset + i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
      parts.push(svg('polyline', { points, fill: 'none', stroke: this.series[si].color, 'stroke-width': 2 }));
      const last = list.length - 1;
      parts.push(svg('circle', { cx: x(offset + last), cy: y(list[last]), r: 3, fill: this.series[si].color }));
    });
    this.plot.replaceChildren(...parts);
  }
}

function niceCeiling(v: number): number {
  const exp = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * exp) return m * exp;
  return 10 * exp;
}
