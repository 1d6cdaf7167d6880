// A bar chart of plain elements (no chart library: a few dozen bars need none): each bar is a row
// with its label and its value in text, so the figures read without the colours or the lengths,
// and the chart reflows from 1280 to 390 px wide.
export interface Bar {
  label: string;
  value: number;
  /** The value as shown (with its unit). */
  text: string;
  href?: string;
}

export function BarChart({ bars, title, id }: { bars: Bar[]; title: string; id: string }) {
  const max = Math.max(...bars.map((b) => b.value), 1e-9);
  return (
    <figure class="chart" id={id}>
      <figcaption>{title}</figcaption>
      <ul class="bars">
        {bars.map((b) => (
          <li data-label={b.label}>
            <span class="bar-label">{b.href ? <a href={b.href}>{b.label}</a> : b.label}</span>
            <span class="bar-track" aria-hidden="true">
              <span class="bar-fill" style={{ width: `${b.value > 0 ? Math.max(0.5, (100 * b.value) / max) : 0}%` }} />
            </span>
            <span class="bar-value num">{b.text}</span>
          </li>
        ))}
      </ul>
    </figure>
  );
}
