import { useEffect, useState } from 'react';
import { Chart, ChartAxis, ChartLine, ChartScatter, ChartThemeColor } from '@patternfly/react-charts/victory';
import { Content, Progress as Bar, ProgressMeasureLocation, ProgressSize } from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { get, History, jobPath, Progress } from './api';
import { age, duration } from './live';

// left is the time left as the screens say it, or '' when none is known.
function left(p: Progress): string {
  return p.leftSeconds === undefined ? '' : `about ${duration(p.leftSeconds)} left`;
}

// listedMetrics is how many metrics the list shows beside a job's bar, as
// describe's Progress line does.
const listedMetrics = 2;

// latest is the first metrics of a report as name=value, saying how many
// more there are.
function latest(p: Progress): string {
  const ms = p.metrics ?? [];
  const shown = ms.slice(0, listedMetrics).map((m) => `${m.name}=${m.value}`);
  if (ms.length > listedMetrics) shown.push(`${ms.length - listedMetrics} more`);
  return shown.join(', ');
}

// ProgressCell is a job's progress in the list: a small bar, the time left
// and the latest metrics, or a dash when its program reports none.
export function ProgressCell({ name, progress }: { name: string; progress?: Progress }) {
  if (progress?.percent === undefined) {
    return <>{progress && latest(progress) ? latest(progress) : '-'}</>;
  }
  return (
    <Bar value={progress.percent} size={ProgressSize.sm} measureLocation={ProgressMeasureLocation.outside}
      aria-label={`Progress of ${name}`} helperText={[left(progress), latest(progress)].filter((s) => s).join('; ') || undefined} />
  );
}

// ProgressSection is a job's last report on its page: the bar, the time
// left, when it came, and the program's metrics.
export function ProgressSection({ progress }: { progress: Progress }) {
  const when = progress.reported ? `reported ${age(progress.reported)} ago` : '';
  return (
    <section aria-label="Progress" className="torus-progress">
      {progress.percent !== undefined && (
        <Bar value={progress.percent} title="Training progress" measureLocation={ProgressMeasureLocation.outside}
          helperText={[left(progress), when].filter((s) => s).join('; ') || undefined} />
      )}
      {progress.percent === undefined && when && <Content component="p">Last report {when}</Content>}
      {(progress.metrics ?? []).length > 0 && (
        <Table aria-label="Metrics" variant="compact">
          <Thead><Tr><Th>Metric</Th><Th>Latest value</Th></Tr></Thead>
          <Tbody>{(progress.metrics ?? []).map((m, i) => (
            <Tr key={i}><Td dataLabel="Metric">{m.name}</Td><Td dataLabel="Latest value">{m.value}</Td></Tr>
          ))}</Tbody>
        </Table>
      )}
    </section>
  );
}

// MetricCharts draws each metric the job's program reported as a number,
// over the run, from the history the status server keeps; read again with
// each new report.
export function MetricCharts({ namespace, name, reported }: { namespace: string; name: string; reported?: string }) {
  const [history, setHistory] = useState<History>();
  useEffect(() => {
    let stop = false;
    get<History>(`${jobPath(namespace, name)}/history`).then((h) => { if (!stop) setHistory(h); }, () => {});
    return () => { stop = true; };
  }, [namespace, name, reported]);
  const series = (history?.series ?? []).filter((s) => (s.points ?? []).length > 0);
  if (series.length === 0) {
    return null;
  }
  return (
    <div className="torus-charts">
      {series.map((s) => <MetricChart key={s.name} name={s.name} points={s.points!} />)}
    </div>
  );
}

// MetricChart is one metric's line, against the time since its first
// point; its title and description say what it shows to a screen reader.
function MetricChart({ name, points }: { name: string; points: { t: number; v: number }[] }) {
  const first = points[0];
  const last = points[points.length - 1];
  const data = points.map((p) => ({ x: p.t - first.t, y: p.v }));
  const span = last.t - first.t;
  const desc = `${points.length} ${points.length === 1 ? 'point' : 'points'} over ${duration(span)}: from ${first.v} to ${last.v}`;
  return (
    <figure className="torus-chart" aria-label={`${name} over the run`}>
      <figcaption>{name}: {last.v} <span className="torus-chart-span">({desc})</span></figcaption>
      <Chart ariaTitle={`${name} over the run`} ariaDesc={desc} height={200} width={460} themeColor={ChartThemeColor.blue}
        padding={{ top: 10, bottom: 50, left: 70, right: 20 }} domainPadding={{ y: 8 }}>
        <ChartAxis label="time since the first report" tickFormat={(t: number) => duration(t)} tickCount={Math.min(5, Math.max(2, points.length))} />
        <ChartAxis dependentAxis showGrid />
        <ChartLine data={data} />
        <ChartScatter data={data} size={2} />
      </Chart>
    </figure>
  );
}
