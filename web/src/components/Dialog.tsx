// A modal dialog on the native <dialog> element (focus trap, Escape to close, backdrop).
import { type ReactNode, useEffect, useRef } from 'react';

export function Dialog(props: { title: string; onClose: () => void; children: ReactNode; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const el = ref.current;
    if (el && !el.open) el.showModal();
    // showModal focuses the first focusable element (Close): the first field is more useful
    el?.querySelector<HTMLElement>('.dialog-body :is(input, textarea, select, button)')?.focus();
  }, []);
  return (
    <dialog
      ref={ref}
      className={`dialog ${props.wide ? 'wide' : ''}`}
      aria-label={props.title}
      onClose={props.onClose}
      onCancel={(e) => {
        e.preventDefault();
        props.onClose();
      }}
    >
      <header className="dialog-head">
        <h2>{props.title}</h2>
        <button className="icon" aria-label="Close" onClick={props.onClose}>
          ×
        </button>
      </header>
      <div className="dialog-body">{props.children}</div>
    </dialog>
  );
}
