import { useState } from 'react';
import { Alert, Button, Modal, ModalBody, ModalFooter, ModalHeader } from '@patternfly/react-core';
import { remove } from './api';

// DeleteModal asks before deleting a job, as the console does.
export function DeleteModal({ namespace, name, onClose }: { namespace: string; name: string; onClose: (deleted: boolean) => void }) {
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  return (
    <Modal variant="small" isOpen onClose={() => onClose(false)} aria-labelledby="delete-title">
      <ModalHeader title={`Delete job ${name}?`} labelId="delete-title" titleIconVariant="warning" />
      <ModalBody>
        The job's pods, logs and keys go with it. This cannot be undone.
        {error && <Alert variant="danger" isInline title="Not deleted">{error}</Alert>}
      </ModalBody>
      <ModalFooter>
        <Button variant="danger" isLoading={busy} onClick={() => {
          setBusy(true);
          remove(namespace, name).then(() => onClose(true), (e: Error) => { setBusy(false); setError(e.message); });
        }}>Delete</Button>
        <Button variant="link" onClick={() => onClose(false)}>Cancel</Button>
      </ModalFooter>
    </Modal>
  );
}
