import { memo, useCallback, useEffect, useState } from 'react';
import {
  Alert, Button, Checkbox, Content, EmptyState, EmptyStateBody, FormSelect, FormSelectOption, PageSection, SearchInput,
  Title, Toolbar, ToolbarContent, ToolbarItem,
} from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { get, Row } from './api';
import { age, duration, useStream } from './live';
import { StalledLabel, StateLabel } from './status';
import { DeleteModal } from './DeleteModal';
import { ProgressCell } from './progress';

function distinct(rows: Row[], pick: (r: Row) => string | undefined): string[] {
  return [...new Set(rows.map(pick).filter((v): v is string => !!v))].sort();
}

const key = (r: { namespace: string; name: string }) => `${r.namespace}/${r.name}`;

// useRows reads the list of jobs once, then keeps it by the server's
// changes of one row at a time (a job's new row, or its name when it is
// gone); it reads the whole list again when the server says to.
function useRows(q: string): { data?: Row[]; error?: string; reload: () => void } {
  const [rows, setRows] = useState<Map<string, Row>>();
  const [error, setError] = useState<string>();
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  useEffect(() => {
    let stale = false;
    get<Row[]>(`/api/jobs?${q}`).then(
      (l) => { if (!stale) { setRows(new Map(l.map((r) => [key(r), r]))); setError(undefined); } },
      (e: Error) => { if (!stale) setError(e.message); },
    );
    return () => { stale = true; };
  }, [q, tick]);
  useStream(`/api/watch?rows=true&${q}`, {
    changed: reload,
    job: (d) => { const r: Row = JSON.parse(d); setRows((m) => new Map(m ?? []).set(key(r), r)); },
    gone: (d) => { const r = JSON.parse(d); setRows((m) => { const n = new Map(m ?? []); n.delete(key(r)); return n; }); },
  });
  return { data: rows ? [...rows.values()] : undefined, error, reload };
}

// JobRow is one job of the list; it draws again only when its row changes.
const JobRow = memo(function JobRow({ r, all, onDelete }: { r: Row; all: boolean; onDelete: (r: Row) => void }) {
  return (
    <Tr>
      <Td dataLabel="Name">{r.mpi ? <a href={`#/jobs/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.name)}`}>{r.name}</a> : r.name}</Td>
      {all && <Td dataLabel="Namespace">{r.namespace}</Td>}
      <Td dataLabel="Type">{r.type || 'unknown'}</Td>
      <Td dataLabel="State">
        <StateLabel phase={r.state.phase} /> <StalledLabel why={r.state.stalled} />
        {['Queued', 'Pending', 'Restarting', 'Blocked', 'Failed'].includes(r.state.phase) && r.state.message && (
          <div className="torus-why">{r.state.message.length > 120 ? `${r.state.message.slice(0, 119)}…` : r.state.message}</div>
        )}
        {r.state.stalled && (
          <div className="torus-why">{r.state.stalled.length > 120 ? `${r.state.stalled.slice(0, 119)}…` : r.state.stalled}</div>
        )}
      </Td>
      <Td dataLabel="Workers ready">{r.readyWorkers}/{r.workers}</Td>
      <Td dataLabel="Ranks">{r.slots || '-'}</Td>
      <Td dataLabel="Restarts">{r.restarts}</Td>
      <Td dataLabel="Progress"><ProgressCell name={r.name} progress={r.progress} /></Td>
      <Td dataLabel="Queue">{r.queue ?? '-'}</Td>
      <Td dataLabel="Duration">{r.duration ? duration(r.duration / 1e9) : '-'}</Td>
      <Td dataLabel="Age">{age(r.created)}</Td>
      <Td dataLabel="Actions">
        {r.mpi && <Button variant="link" component="a" href={`#/create?from=${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.name)}`} aria-label={`Clone ${r.name}`}>Clone</Button>}
        {r.mpi && <Button variant="link" isDanger onClick={() => onDelete(r)} aria-label={`Delete ${r.name}`}>Delete</Button>}
      </Td>
    </Tr>
  );
});

// JobsPage lists every TrainJob of the namespace (or of all the user may
// list), failed ones first, filterable, updated as the cluster changes.
export function JobsPage() {
  const [all, setAll] = useState(false);
  const q = all ? 'all=true' : '';
  const { data, error, reload } = useRows(q);
  const [text, setText] = useState('');
  const [state, setState] = useState('');
  const [type, setType] = useState('');
  const [queue, setQueue] = useState('');
  const [owner, setOwner] = useState('');
  const [deleting, setDeleting] = useState<Row>();
  const onDelete = useCallback((r: Row) => setDeleting(r), []);
  const [namespace, setNamespace] = useState<string>();
  useEffect(() => {
    get<{ namespace: string }>('/api/context').then((c) => setNamespace(c.namespace), () => setNamespace(''));
  }, []);
  const rows = (data ?? [])
    .filter((r) => !text || r.name.includes(text))
    .filter((r) => !state || r.state.phase === state)
    .filter((r) => !type || r.type === type)
    .filter((r) => !queue || (r.queue ?? '') === queue)
    .filter((r) => !owner || (r.owner ?? '') === owner)
    .sort((a, b) => Number(b.state.phase === 'Failed') - Number(a.state.phase === 'Failed') || b.created.localeCompare(a.created));
  const select = (label: string, value: string, set: (v: string) => void, options: string[]) => (
    <ToolbarItem>
      <FormSelect aria-label={label} value={value} onChange={(_e, v) => set(v)}>
        <FormSelectOption value="" label={`${label}: all`} />
        {options.map((o) => <FormSelectOption key={o} value={o} label={o} />)}
      </FormSelect>
    </ToolbarItem>
  );
  return (
    <>
      <PageSection>
        <Title headingLevel="h1">Jobs</Title>
        <Content component="p">
          {all ? 'Every namespace you may list' : `Namespace ${namespace ?? ''}`}: updated as the cluster changes.
        </Content>
      </PageSection>
      <PageSection>
        {error && (
          <Alert variant="danger" isInline title="Cannot list jobs">
            {error}
            {error.includes('forbidden') && <p>Your account needs the view role in this namespace (edit, to run jobs): ask its administrator.</p>}
          </Alert>
        )}
        <Toolbar>
          <ToolbarContent>
            <ToolbarItem>
              <SearchInput aria-label="Filter by name" placeholder="Filter by name" value={text} onChange={(_e, v) => setText(v)} onClear={() => setText('')} />
            </ToolbarItem>
            {select('State', state, setState, distinct(data ?? [], (r) => r.state.phase))}
            {select('Type', type, setType, distinct(data ?? [], (r) => r.type))}
            {select('Queue', queue, setQueue, distinct(data ?? [], (r) => r.queue))}
            {select('Owner', owner, setOwner, distinct(data ?? [], (r) => r.owner))}
            <ToolbarItem>
              <Checkbox id="all-namespaces" label="All namespaces" isChecked={all} onChange={(_e, v) => setAll(v)} />
            </ToolbarItem>
            <ToolbarItem>
              <Button component="a" href="#/create">Create a job</Button>
            </ToolbarItem>
          </ToolbarContent>
        </Toolbar>
        {data && rows.length === 0 ? (
          <EmptyState titleText="No jobs" headingLevel="h2">
            <EmptyStateBody>{data.length ? 'No job matches the filters.' : <>No jobs here yet: <a href="#/create">create one</a>.</>}</EmptyStateBody>
          </EmptyState>
        ) : (
          <Table aria-label="Jobs" variant="compact">
            <Thead>
              <Tr>
                <Th>Name</Th>{all && <Th>Namespace</Th>}<Th>Type</Th><Th>State</Th><Th>Workers ready</Th><Th>Ranks</Th><Th>Restarts</Th><Th>Progress</Th>
                <Th>Queue</Th><Th>Duration</Th><Th>Age</Th><Th screenReaderText="Actions" />
              </Tr>
            </Thead>
            <Tbody>
              {rows.map((r) => <JobRow key={`${r.namespace}/${r.name}`} r={r} all={all} onDelete={onDelete} />)}
            </Tbody>
          </Table>
        )}
      </PageSection>
      {deleting && <DeleteModal namespace={deleting.namespace} name={deleting.name} onClose={(done) => { setDeleting(undefined); if (done) reload(); }} />}
    </>
  );
}
