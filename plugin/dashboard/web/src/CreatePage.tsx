import { useEffect, useRef, useState } from 'react';
import {
  ActionGroup, Alert, Button, ExpandableSection, Form, FormGroup, FormHelperText, FormSelect, FormSelectOption,
  Grid, GridItem, HelperText, HelperTextItem, PageSection, TextArea, TextInput, Title,
} from '@patternfly/react-core';
import { Clone, Form as JobForm, FieldError, get, jobPath, RuntimeInfo, submit } from './api';

type Key = keyof JobForm;

const empty: JobForm = { name: '', workers: '2', 'slots-per-worker': '1' };

// CreatePage is kubectl mpi run as a form: the essentials in view, MPI
// and pod options folded; checked as the user types by run's rules and the API
// server's dry run, each problem beside its field.
export function CreatePage({ from }: { from?: string }) {
  const [form, setForm] = useState<JobForm>(empty);
  const [namespace, setNamespace] = useState('');
  const [errors, setErrors] = useState<FieldError[]>([]);
  const [warnings, setWarnings] = useState<string[]>([]);
  const [notes, setNotes] = useState<string[]>([]);
  const [fit, setFit] = useState<string[]>([]);
  const [runtimes, setRuntimes] = useState<RuntimeInfo[]>([]);
  const [queues, setQueues] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [touched, setTouched] = useState(false);
  const seq = useRef(0);

  // A clone goes to its job's namespace; a new job to the kubeconfig's.
  useEffect(() => {
    if (from) {
      setNamespace(from.split('/')[0]);
      return;
    }
    get<{ namespace: string }>('/api/context').then((c) => setNamespace(c.namespace), () => {});
  }, [from]);
  useEffect(() => {
    if (!namespace) return;
    const ns = encodeURIComponent(namespace);
    get<string[]>(`/api/namespaces/${ns}/queues`).then(setQueues, () => {});
    get<RuntimeInfo[]>(`/api/runtimes?namespace=${ns}`).then((r) => setRuntimes(r.filter((x) => x.policy === 'MPI')), () => {});
  }, [namespace]);
  useEffect(() => {
    if (!from) return;
    const [ns, name] = from.split('/');
    get<Clone>(`${jobPath(ns, name)}/form`).then((c) => {
      setForm({ ...c.form, name: `${name}-2` });
      setNotes(c.notes ?? []);
      setTouched(true);
    }, (e: Error) => setErrors([{ field: '', message: e.message }]));
  }, [from]);
  // Checked as typed: the newest answer wins.
  useEffect(() => {
    if (!touched || !namespace) return;
    const n = ++seq.current;
    const t = setTimeout(() => {
      submit(namespace, form, true).then((o) => {
        if (n !== seq.current) return;
        setErrors(o.errors ?? []);
        setWarnings(o.warnings ?? []);
        setFit(o.notes ?? []);
      }, () => {});
    }, 300);
    return () => clearTimeout(t);
  }, [form, namespace, touched]);

  const set = (k: Key) => (_e: unknown, v: string) => { setTouched(true); setForm((f) => ({ ...f, [k]: v })); };
  const errorsOf = (k: string) => errors.filter((e) => e.field === k);
  const general = errors.filter((e) => !fields.some(([k]) => k === e.field) && !linesFields.includes(e.field));
  const text = (k: Key, label: string, help: string, required = false) => {
    const errs = errorsOf(k);
    return (
      <FormGroup label={label} fieldId={`f-${k}`} isRequired={required}>
        <TextInput id={`f-${k}`} name={k} value={(form[k] as string) ?? ''} onChange={set(k)} isRequired={required}
          validated={errs.length ? 'error' : 'default'} aria-describedby={`f-${k}-help`} />
        <FormHelperText>
          <HelperText id={`f-${k}-help`} aria-live="polite">
            {errs.length ? errs.map((e, i) => <HelperTextItem key={i} variant="error">{e.message}</HelperTextItem>)
              : <HelperTextItem>{help}</HelperTextItem>}
          </HelperText>
        </FormHelperText>
      </FormGroup>
    );
  };
  const create = () => {
    setBusy(true);
    submit(namespace, form, false).then((o) => {
      setBusy(false);
      if (o.errors?.length) { setErrors(o.errors); return; }
      window.location.hash = `#/jobs/${encodeURIComponent(namespace)}/${encodeURIComponent(form.name)}`;
    }, (e: Error) => { setBusy(false); setErrors([{ field: '', message: e.message }]); });
  };
  const runtimeErrors = errorsOf('runtime');
  return (
    <>
      <PageSection>
        <Title headingLevel="h1">{from ? `Clone ${from.split('/')[1]}` : 'Create an MPI job'}</Title>
      </PageSection>
      <PageSection>
        <Form onSubmit={(e) => { e.preventDefault(); create(); }} aria-label="Create an MPI job">
          {general.map((e, i) => <Alert key={i} variant="danger" isInline title={e.message} />)}
          {warnings.map((w, i) => <Alert key={i} variant="warning" isInline title={w} />)}
          {notes.map((n, i) => <Alert key={`n${i}`} variant="info" isInline title={n} />)}
          {fit.map((n, i) => <Alert key={`f${i}`} variant="info" isInline title="Will it fit?">{n}</Alert>)}
          <Grid hasGutter md={6}>
            <GridItem>{text('name', 'Name', 'Lowercase letters, digits and -: the pods\' host names start with it.', true)}</GridItem>
            <GridItem>{text('image', 'Image', 'The image of the launcher and workers; empty: the runtime\'s.')}</GridItem>
            <GridItem span={12}>{text('command', 'Command', 'What the launcher runs, e.g. mpirun -n 4 python3 train.py; empty: the runtime\'s.')}</GridItem>
            <GridItem>{text('workers', 'Workers', 'Pods running ranks.')}</GridItem>
            <GridItem>{text('slots-per-worker', 'Slots per worker', 'MPI ranks on each worker.')}</GridItem>
            <GridItem>{text('cpu', 'CPU per worker', 'e.g. 500m or 4.')}</GridItem>
            <GridItem>{text('memory', 'Memory per worker', 'e.g. 512Mi or 16Gi.')}</GridItem>
            <GridItem>{text('gpus', 'GPUs per worker', 'nvidia.com/gpu unless the runtime says otherwise.')}</GridItem>
            <GridItem>
              <FormGroup label="Runtime" fieldId="f-runtime">
                <FormSelect id="f-runtime" value={form.runtime ?? ''} onChange={set('runtime')} validated={runtimeErrors.length ? 'error' : 'default'} aria-describedby="f-runtime-help">
                  <FormSelectOption value="" label="The default for the MPI implementation" />
                  {runtimes.map((r) => {
                    const v = r.kind === 'ClusterTrainingRuntime' ? r.name : `${r.kind}/${r.name}`;
                    return <FormSelectOption key={v} value={v} label={`${r.name} (${r.implementation ?? 'MPI'})`} />;
                  })}
                </FormSelect>
                <FormHelperText>
                  <HelperText id="f-runtime-help" aria-live="polite">
                    {runtimeErrors.length ? runtimeErrors.map((e, i) => <HelperTextItem key={i} variant="error">{e.message}</HelperTextItem>)
                      : <HelperTextItem>The TrainingRuntime the job runs on.</HelperTextItem>}
                  </HelperText>
                </FormHelperText>
              </FormGroup>
            </GridItem>
            <GridItem>{text('queue', 'Queue', queues.length ? `Kueue LocalQueues here: ${queues.join(', ')}.` : 'A Kueue LocalQueue; empty: none.')}</GridItem>
          </Grid>
          <ExpandableSection toggleText="MPI and pod options">
            <Grid hasGutter md={6}>
              <GridItem>
                <FormGroup label="MPI implementation" fieldId="f-mpi">
                  <FormSelect id="f-mpi" value={form.mpi ?? ''} onChange={set('mpi')}>
                    {[['', 'The runtime\'s'], ['openmpi', 'Open MPI 4'], ['openmpi5', 'Open MPI 5'], ['intel', 'Intel MPI'], ['mpich', 'MPICH']].map(([v, l]) => <FormSelectOption key={v} value={v} label={l} />)}
                  </FormSelect>
                </FormGroup>
              </GridItem>
              <GridItem>{text('network', 'Network profile', 'An MPINetworkProfile for InfiniBand or RoCE.')}</GridItem>
              <GridItem>{text('topology', 'Topology', 'A node label all pods share a value of, e.g. a rack.')}</GridItem>
              <GridItem>{text('scheduling-timeout', 'Scheduling timeout', 'Fail the job if its pods are not all running by then, e.g. 10m.')}</GridItem>
              <GridItem>{text('checkpoint-volume', 'Checkpoint volume', 'CLAIM or CLAIM:/path: a ReadWriteMany claim every pod mounts, for checkpoints.')}</GridItem>
              <GridItem>{text('priority', 'Priority', 'A Kueue WorkloadPriorityClass: a job of higher priority is admitted first, and may preempt one of lower.')}</GridItem>
              <GridItem>{text('termination-grace-period', 'Grace period', 'How long every rank has to write a checkpoint when the job is stopped, preempted or restarted, e.g. 5m.')}</GridItem>
              <GridItem>{text('max-restarts', 'Restarts', 'Start the whole job again this many times if its program fails; evictions and lost nodes do not count.')}</GridItem>
              <GridItem>{text('stall-timeout', 'Stall timeout', 'Fail the running job when its launcher prints nothing this long, e.g. 30m.')}</GridItem>
              <GridItem span={12}>
                <LinesField id="volume" label="Volumes" values={form.volume} errors={errorsOf('volume')}
                  help="PersistentVolumeClaims to mount in the launcher and every worker, one per line: pvc:CLAIM:/path, with :ro for read-only."
                  onChange={(v) => { setTouched(true); setForm((f) => ({ ...f, volume: v })); }} />
              </GridItem>
              <GridItem span={12}>
                <LinesField id="env" label="Environment" values={form.env} errors={errorsOf('env')} help="NAME=VALUE, one per line."
                  onChange={(v) => { setTouched(true); setForm((f) => ({ ...f, env: v })); }} />
              </GridItem>
              <GridItem>
                <LinesField id="image-pull-secret" label="Image pull secrets" values={form['image-pull-secret']} errors={errorsOf('image-pull-secret')}
                  help="Secrets in the job's namespace the kubelet pulls the image with, one per line."
                  onChange={(v) => { setTouched(true); setForm((f) => ({ ...f, 'image-pull-secret': v })); }} />
              </GridItem>
              <GridItem>{text('service-account', 'Service account', 'The ServiceAccount the pods run as; empty: the runtime\'s.')}</GridItem>
              <GridItem>
                <FormGroup label="Rank launch" fieldId="f-launch">
                  <FormSelect id="f-launch" value={form.launch ?? ''} onChange={set('launch')} aria-describedby="f-launch-help">
                    {[['', 'The runtime\'s'], ['agent', 'Torus\'s launch agent'], ['openssh', 'The image\'s OpenSSH']].map(([v, l]) => <FormSelectOption key={v} value={v} label={l} />)}
                  </FormSelect>
                  <FormHelperText>
                    <HelperText id="f-launch-help" aria-live="polite">
                      {errorsOf('launch').length ? errorsOf('launch').map((e, i) => <HelperTextItem key={i} variant="error">{e.message}</HelperTextItem>)
                        : <HelperTextItem>With Torus's launch agent the image needs MPI and no OpenSSH.</HelperTextItem>}
                    </HelperText>
                  </FormHelperText>
                </FormGroup>
              </GridItem>
            </Grid>
          </ExpandableSection>
          <ActionGroup>
            <Button type="submit" isLoading={busy} isDisabled={busy || !form.name || errors.length > 0}>Create</Button>
            <Button variant="link" component="a" href="#/jobs">Cancel</Button>
          </ActionGroup>
        </Form>
      </PageSection>
    </>
  );
}

// LinesField is a repeatable flag as a text area, one value per line, with
// its errors under it.
function LinesField({ id, label, values, errors, help, onChange }: {
  id: string; label: string; values?: string[]; errors: FieldError[]; help: string; onChange: (v: string[]) => void;
}) {
  return (
    <FormGroup label={label} fieldId={`f-${id}`}>
      <TextArea id={`f-${id}`} value={(values ?? []).join('\n')} aria-describedby={`f-${id}-help`}
        onChange={(_e, v) => onChange(v.split('\n'))} validated={errors.length ? 'error' : 'default'} />
      <FormHelperText>
        <HelperText id={`f-${id}-help`} aria-live="polite">
          {errors.length ? errors.map((e, i) => <HelperTextItem key={i} variant="error">{e.message}</HelperTextItem>)
            : <HelperTextItem>{help}</HelperTextItem>}
        </HelperText>
      </FormHelperText>
    </FormGroup>
  );
}

// fields the form shows a field for; other errors are the whole job's.
const fields: [string][] = [['name'], ['image'], ['command'], ['workers'], ['slots-per-worker'], ['cpu'], ['memory'], ['gpus'],
  ['runtime'], ['queue'], ['priority'], ['network'], ['topology'], ['scheduling-timeout'], ['max-restarts'], ['termination-grace-period'], ['stall-timeout'], ['checkpoint-volume'], ['service-account'], ['launch']];

// linesFields are the repeatable flags, each a LinesField with its errors.
const linesFields = ['env', 'volume', 'image-pull-secret'];
