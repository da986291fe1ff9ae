import { Content, Progress as Bar, ProgressMeasureLocation, ProgressSize } from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { Progress } from './api';
import { age, duration } from './live';

// left is the time left as the screens say it, or '' when none is known.
function left(p: Progress): string {
  return p.leftSeconds === undefined ? '' : `about ${duration(p.leftSeconds)} left`;
}

// ProgressCell is a job's progress in the list: a small bar and the time
// left, or a dash when its program reports none.
export function ProgressCell({ name, progress }: { name: string; progress?: Progress }) {
  if (progress?.percent === undefined) {
    return <>-</>;
  }
  return (
    <Bar value={progress.percent} size={ProgressSize.sm} measureLocation={ProgressMeasureLocation.outside}
      aria-label={`Progress of ${name}`} helperText={left(progress) || undefined} />
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
