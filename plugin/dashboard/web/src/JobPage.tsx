import { useEffect, useRef, useState } from 'react';
import {
  Alert, Breadcrumb, BreadcrumbItem, Button, CodeBlock, CodeBlockCode, DescriptionList, DescriptionListDescription,
  DescriptionListGroup, DescriptionListTerm, ExpandableSection, Flex, FlexItem, FormSelect, FormSelectOption, PageSection,
  Switch, Tab, Tabs, TabTitleText, Title,
} from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { authorized, get, getText, Host, JobUsage, jobPath, View } from './api';
import { age, duration, useLive } from './live';
import { HealthLabel, StalledLabel, StateLabel } from './status';
import { DeleteModal } from './DeleteModal';
import { MetricCharts, ProgressSection } from './progress';

// Beyond this many hosts the topology shows counts first, the hosts on
// demand.
const manyHosts = 64;

function mib(bytes: number): string {
  return `${Math.round(bytes / (1 << 20))}Mi`;
}

// cpu shows millicores, or that the rate is not known yet.
function cpu(millis: number | undefined): string {
  return millis === undefined ? 'pending' : `${millis}m`;
}

// Topology draws the hosts as tiles; beyond manyHosts, only when asked for
// (showAll): thousands of tiles would slow every update.
function Topology({ hosts, usage, showAll, setShowAll }: { hosts: Host[]; usage?: JobUsage; showAll: boolean; setShowAll: (v: boolean) => void }) {
  const counts = new Map<string, number>();
  hosts.forEach((h) => counts.set(h.health, (counts.get(h.health) ?? 0) + 1));
  const failing = hosts.filter((h) => h.health === 'Failed' || h.health === 'OOMKilled');
  const grid = (list: Host[]) => (
    <ul className="torus-topology" aria-label="Hosts">
      {list.map((h) => (
        <li key={h.host} className={`torus-host torus-host--${h.health}`}>
          <strong>{h.host}</strong> <HealthLabel health={h.health} />
          <div>ranks {h.ranks}</div>
          <div>{h.node || 'not scheduled'}</div>
          {h.reason && <div>{h.reason}</div>}
          {usage?.hosts[h.host] && <div>CPU {cpu(usage.hosts[h.host].cpuMillis)}, memory {mib(usage.hosts[h.host].memoryBytes)}</div>}
          {(usage?.hosts[h.host]?.gpus ?? []).map((g) => (
            <div key={g.index}>GPU {g.index}: {g.utilizationPercent}%, {g.memoryUsedMiB} of {g.memoryTotalMiB} MiB</div>
          ))}
        </li>
      ))}
    </ul>
  );
  return (
    <>
      {usage && <p>{usage.source ? `CPU and memory from ${usage.source}; GPUs from nvidia-smi in the ranks' containers, where it runs.` : `No CPU and memory figures: ${usage.unavailable}`}</p>}
      <Flex aria-label="Hosts by state">
        {[...counts.entries()].map(([k, n]) => <FlexItem key={k}><HealthLabel health={k} /> {n}</FlexItem>)}
      </Flex>
      {hosts.length <= manyHosts ? grid(hosts) : (
        <>
          {failing.length > 0 && grid(failing)}
          <ExpandableSection toggleText={`All ${hosts.length} hosts`} isExpanded={showAll} onToggle={(_e, v) => setShowAll(v)}>
            {showAll && grid(hosts)}
          </ExpandableSection>
        </>
      )}
    </>
  );
}

// Logs streams the job's logs as kubectl mpi logs does: one host, or
// several with each line prefixed; following until the job ends. Without a
// host chosen the server streams the first hosts only (the launcher, then
// workers by index) and says how many: the page says so.
function Logs({ namespace, name, hosts }: { namespace: string; name: string; hosts: Host[] }) {
  const [host, setHost] = useState('');
  const [follow, setFollow] = useState(true);
  const [text, setText] = useState('');
  const [firstHosts, setFirstHosts] = useState<number>();
  const pre = useRef<HTMLPreElement>(null);
  const withPods = hosts.filter((h) => h.pod);
  const capped = firstHosts !== undefined && withPods.length > firstHosts;
  useEffect(() => {
    const ctl = new AbortController();
    setText('');
    const q = new URLSearchParams({ follow: String(follow), tail: '1000' });
    if (host) q.set('host', host);
    fetch(`${jobPath(namespace, name)}/logs?${q}`, authorized({ signal: ctl.signal })).then(async (r) => {
      const n = Number(r.headers.get('X-Torus-Log-Hosts'));
      if (n > 0) setFirstHosts(n);
      const reader = r.body!.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        setText((t) => (t + dec.decode(value, { stream: true })).slice(-1_000_000));
      }
    }).catch(() => { /* aborted: another host or page */ });
    return () => ctl.abort();
  }, [namespace, name, host, follow]);
  useEffect(() => { pre.current?.scrollTo(0, pre.current.scrollHeight); }, [text]);
  return (
    <>
      <Flex>
        <FlexItem>
          <FormSelect aria-label="Host" value={host} onChange={(_e, v) => setHost(v)}>
            <FormSelectOption value="" label={capped ? `The first ${firstHosts} hosts` : 'All hosts'} />
            {withPods.map((h) => <FormSelectOption key={h.host} value={h.host} label={`${h.host} (ranks ${h.ranks})`} />)}
          </FormSelect>
        </FlexItem>
        <FlexItem><Switch id="follow" label="Follow" isChecked={follow} onChange={(_e, v) => setFollow(v)} /></FlexItem>
      </Flex>
      {capped && !host && (
        <p className="torus-log-hosts">
          Showing the logs of the launcher and workers 0 to {firstHosts! - 2}: {firstHosts} of {withPods.length} hosts. Choose a host to read another.
        </p>
      )}
      <pre ref={pre} className="torus-logs" aria-label="Logs" tabIndex={0}>{text || 'No output yet.'}</pre>
    </>
  );
}

// Headline says first what matters most: why a job failed (the rank, the
// cause, its last words, the fix) or why it waits.
function Headline({ view: v }: { view: View }) {
  const failed = v.state.phase === 'Failed';
  const fields = (v.headline ?? []).filter((f) => f.name !== 'Status');
  const status = (v.headline ?? []).find((f) => f.name === 'Status');
  const variant = failed ? 'danger' : v.state.phase === 'Complete' || v.state.phase === 'Running' ? 'success' : 'info';
  return (
    <Alert variant={variant} isInline title={failed ? 'Why it failed' : status?.value ?? v.state.phase}>
      {fields.length > 0 && (
        <DescriptionList isHorizontal isCompact>
          {fields.map((f, i) => (
            <DescriptionListGroup key={i}>
              <DescriptionListTerm>{f.name}</DescriptionListTerm>
              <DescriptionListDescription>{f.value}</DescriptionListDescription>
            </DescriptionListGroup>
          ))}
        </DescriptionList>
      )}
    </Alert>
  );
}

export function JobPage({ namespace, name }: { namespace: string; name: string }) {
  const { data: v, error } = useLive<View>(jobPath(namespace, name), `/api/watch?namespace=${encodeURIComponent(namespace)}&job=${encodeURIComponent(name)}`);
  const [tab, setTab] = useState<string | number>('overview');
  const [yaml, setYaml] = useState('');
  const [deleting, setDeleting] = useState(false);
  const [usage, setUsage] = useState<JobUsage>();
  const [showAllHosts, setShowAllHosts] = useState(false);
  const running = v?.state.phase === 'Running' || v?.state.phase === 'Pending' || v?.state.phase === 'Restarting';
  // Usage is read while the job's pods run and their tiles are drawn, as
  // top --watch: every 5 s from metrics.k8s.io (one request), and, from
  // the kubelets (a request a node), 5 s more for every 64 nodes.
  const usageShown = running && (v?.hosts.length ?? 0) > 0 && ((v?.hosts.length ?? 0) <= manyHosts || showAllHosts);
  const nodes = new Set(v?.hosts.map((h) => h.node).filter((n) => n)).size;
  const every = usage?.source === 'metrics.k8s.io' ? 5000 : 5000 * Math.max(1, Math.ceil(nodes / 64));
  useEffect(() => {
    if (!usageShown) return;
    let stop = false;
    const read = () => get<JobUsage>(`${jobPath(namespace, name)}/usage`).then((u) => { if (!stop) setUsage(u); }, () => {});
    read();
    const t = setInterval(read, every);
    return () => { stop = true; clearInterval(t); };
  }, [namespace, name, usageShown, every]);
  useEffect(() => {
    if (tab === 'yaml') getText(`${jobPath(namespace, name)}/yaml`).then(setYaml, (e: Error) => setYaml(e.message));
  }, [tab, namespace, name, v]);
  return (
    <>
      <PageSection>
        <Breadcrumb>
          <BreadcrumbItem to="#/jobs">Jobs</BreadcrumbItem>
          <BreadcrumbItem isActive>{name}</BreadcrumbItem>
        </Breadcrumb>
        <Flex>
          <FlexItem><Title headingLevel="h1">{name}</Title></FlexItem>
          {v && <FlexItem><StateLabel phase={v.state.phase} /> <StalledLabel why={v.state.stalled} /></FlexItem>}
          <FlexItem align={{ default: 'alignRight' }}>
            <Button variant="secondary" component="a" href={`#/create?from=${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`}>Clone and modify</Button>{' '}
            <Button variant="danger" onClick={() => setDeleting(true)}>Delete</Button>
          </FlexItem>
        </Flex>
      </PageSection>
      <PageSection>
        {error && <Alert variant="danger" isInline title="Cannot read the job">{error}</Alert>}
        {v && v.headline && v.headline.length > 0 && <Headline view={v} />}
        {v && (
          <Tabs activeKey={tab} onSelect={(_e, k) => setTab(k)} aria-label="Job" mountOnEnter>
            <Tab eventKey="overview" title={<TabTitleText>Overview</TabTitleText>}>
              <DescriptionList isHorizontal columnModifier={{ default: '2Col' }}>
                {([
                  ['Namespace', v.namespace], ['MPI', `${v.mpi || 'unknown'}: ${v.workers} workers × ${v.slotsPerHost} slots = ${v.slots} ranks`],
                  ['Runtime', v.runtime], ['Image', v.image], ['Command', v.command], ['Queue', v.queue],
                  ['Created', `${age(v.created)} ago${v.owner ? ` by ${v.owner}` : ''}`], ['Duration', v.duration ? duration(v.duration / 1e9) : undefined],
                ] as [string, string | undefined][]).filter(([, d]) => d).map(([t, d]) => (
                  <DescriptionListGroup key={t}><DescriptionListTerm>{t}</DescriptionListTerm><DescriptionListDescription>{d}</DescriptionListDescription></DescriptionListGroup>
                ))}
              </DescriptionList>
              {v.progress && (
                <>
                  <Title headingLevel="h2" className="torus-section-title">Progress</Title>
                  <ProgressSection progress={v.progress} />
                  <MetricCharts namespace={namespace} name={name} reported={v.progress.reported} />
                </>
              )}
              {(v.restarts.total > 0 || (v.restarts.evictions ?? 0) > 0) && (
                <>
                  <Title headingLevel="h2" className="torus-section-title">
                    Restarts: {v.restarts.total}, {v.restarts.counted} counted against the budget of {v.restarts.budget}
                    {(v.restarts.evictions ?? 0) > 0 && `, evicted by Kueue ${v.restarts.evictions} ${v.restarts.evictions === 1 ? 'time' : 'times'}`}
                  </Title>
                  <Table aria-label="Restarts" variant="compact">
                    <Thead><Tr><Th>Run</Th><Th>Stopped</Th><Th>Counted</Th><Th>Why</Th></Tr></Thead>
                    <Tbody>{(v.restarts.latest ?? []).map((x) => (
                      <Tr key={`${x.run}-${x.at}`}><Td>{x.run}</Td><Td>{age(x.at)} ago</Td><Td>{x.evicted ? 'no: evicted by Kueue' : x.counted === undefined ? 'unknown' : x.counted ? 'yes' : 'no'}</Td><Td>{x.cause}</Td></Tr>
                    ))}</Tbody>
                  </Table>
                </>
              )}
              <Title headingLevel="h2" className="torus-section-title">Hosts and ranks</Title>
              <Topology hosts={v.hosts} usage={usageShown ? usage : undefined} showAll={showAllHosts} setShowAll={setShowAllHosts} />
            </Tab>
            <Tab eventKey="logs" title={<TabTitleText>Logs</TabTitleText>}>
              <Logs namespace={namespace} name={name} hosts={v.hosts} />
            </Tab>
            <Tab eventKey="events" title={<TabTitleText>Events and conditions</TabTitleText>}>
              <Table aria-label="Conditions" variant="compact">
                <Thead><Tr><Th>Condition</Th><Th>Status</Th><Th>Reason</Th><Th>Since</Th><Th>Message</Th></Tr></Thead>
                <Tbody>{v.conditions.map((c) => (
                  <Tr key={c.type}><Td>{c.type}</Td><Td>{c.status}</Td><Td>{c.reason}</Td><Td>{age(c.lastTransitionTime)}</Td><Td>{c.message}</Td></Tr>
                ))}</Tbody>
              </Table>
              <Table aria-label="Events" variant="compact">
                <Thead><Tr><Th>Age</Th><Th>Type</Th><Th>Reason</Th><Th>Object</Th><Th>Message</Th></Tr></Thead>
                <Tbody>{v.events.map((e, i) => (
                  <Tr key={i}><Td>{age(e.time)}{e.count > 1 ? ` (×${e.count})` : ''}</Td><Td>{e.type}</Td><Td>{e.reason}</Td><Td>{e.object}</Td><Td>{e.message}</Td></Tr>
                ))}</Tbody>
              </Table>
            </Tab>
            <Tab eventKey="yaml" title={<TabTitleText>YAML</TabTitleText>}>
              <CodeBlock><CodeBlockCode>{yaml}</CodeBlockCode></CodeBlock>
            </Tab>
          </Tabs>
        )}
      </PageSection>
      {deleting && <DeleteModal namespace={namespace} name={name} onClose={(done) => { setDeleting(false); if (done) window.location.hash = '#/jobs'; }} />}
    </>
  );
}
