import { useEffect, useState } from 'react';
import { Alert, Content, PageSection, Title } from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { get, RuntimeInfo } from './api';

// GuidePage says which kind of job fits which program, from the runtimes
// this cluster has.
export function GuidePage() {
  const [runtimes, setRuntimes] = useState<RuntimeInfo[]>();
  const [error, setError] = useState<string>();
  useEffect(() => { get<RuntimeInfo[]>('/api/runtimes').then(setRuntimes, (e: Error) => setError(e.message)); }, []);
  return (
    <>
      <PageSection>
        <Title headingLevel="h1">Which job type?</Title>
      </PageSection>
      <PageSection>
        <Content>
          <Title headingLevel="h2">MPI</Title>
          <p>
            Programs started by <code>mpirun</code> or <code>mpiexec</code>: Open MPI, Intel MPI, MPICH; Horovod and
            DeepSpeed with an MPI launcher; HPC codes. Torus starts the workers, then the launcher, which reaches every
            worker over SSH with keys made for the job. All ranks start together or none do.
          </p>
          <Title headingLevel="h2">PyTorch</Title>
          <p>
            Programs started by <code>torchrun</code> (PyTorch's own distributed launcher, with NCCL or Gloo): each
            node starts its own processes, no launcher pod and no SSH. Use a runtime with a torch policy.
          </p>
          <Title headingLevel="h2">Other runtimes</Title>
          <p>Jobs on runtimes without an MPI or torch policy run their pods as the runtime says.</p>
        </Content>
        {error && <Alert variant="danger" isInline title="Cannot list runtimes">{error}</Alert>}
        <Title headingLevel="h2">Runtimes on this cluster</Title>
        <Table aria-label="Runtimes" variant="compact">
          <Thead><Tr><Th>Name</Th><Th>Kind</Th><Th>Type</Th><Th>MPI implementation</Th></Tr></Thead>
          <Tbody>
            {(runtimes ?? []).map((r) => (
              <Tr key={`${r.kind}/${r.namespace ?? ''}/${r.name}`}>
                <Td>{r.name}{r.default ? ' (default)' : ''}</Td><Td>{r.kind}</Td><Td>{r.policy}</Td><Td>{r.implementation ?? '-'}</Td>
              </Tr>
            ))}
          </Tbody>
        </Table>
      </PageSection>
    </>
  );
}
