// The dashboard's server: every call carries the session's token, and a
// write is JSON from this origin (the server refuses anything else).

export interface State { phase: string; since: string; reason?: string; message?: string; stalled?: string; stalledSince?: string }
// Progress is the training program's last report (status.trainerStatus).
export interface Progress { percent?: number; leftSeconds?: number; metrics?: { name: string; value: string }[]; reported?: string }
export interface Row {
  namespace: string; name: string; state: State; readyWorkers: number; workers: number; slots: number; restarts: number;
  queue?: string; implementation?: string; runtime: string; duration?: number; created: string; owner?: string; type: string; mpi: boolean;
  progress?: Progress;
}
export interface Field { name: string; value: string }
export interface Host {
  role: string; index: number; host: string; ranks: string; pod?: string; node?: string; state: string;
  restarts: number; reason?: string; health: string;
}
export interface Condition { type: string; status: string; reason: string; message: string; lastTransitionTime: string }
export interface Event { time: string; type: string; reason: string; object: string; message: string; count: number }
export interface Finding { pod?: string; host: string; ranks?: string; reason: string; detail: string; fix?: string; output?: string[]; terminal: boolean }
// Restart is the end of one run of a job, which restarted its world.
export interface Restart { run: number; at: string; counted?: boolean; evicted?: boolean; cause: string }
export interface Restarts { total: number; counted: number; budget: number; evictions?: number; latest?: Restart[] }
export interface View extends Omit<Row, 'mpi' | 'type' | 'restarts'> {
  headline?: Field[]; mpi?: string; image?: string; command?: string; slotsPerHost: number; hosts: Host[];
  restarts: Restarts; conditions: Condition[]; events: Event[]; findings?: Finding[]; problems?: string[];
}
export interface RuntimeInfo { name: string; kind: string; namespace?: string; policy: string; implementation?: string; default: boolean }
export interface Form {
  name: string; namespace?: string; image?: string; command?: string; workers?: string; 'slots-per-worker'?: string;
  gpus?: string; cpu?: string; memory?: string; mpi?: string; runtime?: string; queue?: string; priority?: string; network?: string;
  topology?: string; 'scheduling-timeout'?: string; 'max-restarts'?: string; 'termination-grace-period'?: string; 'stall-timeout'?: string; 'checkpoint-volume'?: string; env?: string[]; volume?: string[];
  'image-pull-secret'?: string[]; 'service-account'?: string; launch?: string;
}
export interface FieldError { field: string; message: string }
export interface Clone { form: Form; notes?: string[] }
export interface Outcome { trainJob?: { metadata: { name: string; namespace: string } }; warnings?: string[]; notes?: string[]; errors?: FieldError[] }

// The session's token: read once from the URL kubectl mpi dashboard
// printed, kept in this origin's storage (this host and port only), and
// sent in a header, never in a cookie, which a browser would send to
// every port of the host.
const tokenKey = 'torus-dashboard-token';
{
  const fromURL = new URLSearchParams(window.location.search).get('token');
  if (fromURL) {
    window.localStorage.setItem(tokenKey, fromURL);
    window.history.replaceState(null, '', window.location.pathname + window.location.hash);
  }
}

export function authorized(init: RequestInit = {}): RequestInit {
  return { ...init, credentials: 'omit', headers: { ...(init.headers ?? {}), Authorization: `Bearer ${window.localStorage.getItem(tokenKey) ?? ''}` } };
}

async function check(r: Response): Promise<Response> {
  if (r.ok) return r;
  let msg = r.statusText;
  try {
    msg = (await r.json()).error ?? msg;
  } catch {
    /* not JSON: the status says it */
  }
  throw new Error(msg);
}

export async function get<T>(url: string): Promise<T> {
  return (await check(await fetch(url, authorized()))).json();
}

export async function getText(url: string): Promise<string> {
  return (await check(await fetch(url, authorized()))).text();
}

export async function submit(ns: string, form: Form, dryRun: boolean): Promise<Outcome> {
  const r = await fetch(`/api/namespaces/${encodeURIComponent(ns)}/jobs${dryRun ? '?dryRun=true' : ''}`, authorized({
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(form),
  }));
  if (r.status === 422 || r.ok) return r.json();
  await check(r);
  return {};
}

export async function remove(ns: string, name: string): Promise<void> {
  await check(await fetch(`/api/namespaces/${encodeURIComponent(ns)}/jobs/${encodeURIComponent(name)}`, authorized({ method: 'DELETE' })));
}

export function jobPath(ns: string, name: string): string {
  return `/api/namespaces/${encodeURIComponent(ns)}/jobs/${encodeURIComponent(name)}`;
}

// History is a job's numeric metrics over its run, as the status server
// keeps them: each series' points (t: seconds since the epoch), oldest first.
export interface History { series: { name: string; points: { t: number; v: number }[] | null }[] }

// cpuMillis is absent until the CPU rate is known (a pod's first kubelet sample).
export interface Usage { cpuMillis?: number; memoryBytes: number; gpus?: GPU[] }
export interface GPU { index: string; name: string; utilizationPercent: number; memoryUsedMiB: number; memoryTotalMiB: number }
export interface JobUsage { hosts: Record<string, Usage>; source?: string; unavailable?: string }
