// The question Settings › Intake asks before a delete (a source, a schedule): what is lost,
// with "Keep it" first (focused) and the delete in red, as the session's delete asks.
import type { ReactNode } from 'react';
import { Dialog } from '../Dialog';

export function ConfirmDelete(props: {
  title: string;
  what: string;
  children: ReactNode;
  onCancel: () => void;
  onConfirm: () => void;
}) {
  return (
    <Dialog title={props.title} onClose={props.onCancel}>
      <p>{props.children}</p>
      <div className="actions">
        <button type="button" onClick={props.onCancel}>
          Keep it
        </button>
        <button
          type="button"
          className="danger"
          onClick={() => {
            props.onCancel();
            props.onConfirm();
          }}
        >
          Delete {props.what}
        </button>
      </div>
    </Dialog>
  );
}
