import { Label } from '@patternfly/react-core';

type Color = 'green' | 'red' | 'blue' | 'orange' | 'grey' | 'purple';

const colors: Record<string, Color> = {
  Running: 'blue', Complete: 'green', Failed: 'red', Queued: 'purple', Pending: 'orange', Restarting: 'orange', Blocked: 'red',
  Suspended: 'grey', Creating: 'grey', Deleting: 'grey',
};

// StateLabel shows a job's state in the console's colours.
export function StateLabel({ phase }: { phase: string }) {
  return <Label color={colors[phase] ?? 'grey'}>{phase}</Label>;
}

// StalledLabel marks a running job that is probably stuck; its title says why.
export function StalledLabel({ why }: { why?: string }) {
  return why ? <Label color="orange" title={why}>Probably stuck</Label> : null;
}

const healthColors: Record<string, Color> = {
  Ready: 'green', Succeeded: 'green', Running: 'blue', Pulling: 'blue', Pending: 'orange',
  NotCreated: 'grey', Deleted: 'grey', Failed: 'red', OOMKilled: 'red',
};

export function HealthLabel({ health }: { health: string }) {
  return <Label isCompact color={healthColors[health] ?? 'grey'}>{health}</Label>;
}
