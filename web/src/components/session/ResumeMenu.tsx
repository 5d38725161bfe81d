// The session toolbar's Resume menu: load the conversation again, or start a fresh one.
import { useState } from 'react';

export function ResumeMenu({
  disabled,
  title,
  onResume,
}: {
  disabled: boolean;
  /** Why it is disabled, when it is. */
  title?: string;
  onResume: (mode: 'load' | 'fresh') => void;
}) {
  const [open, setOpen] = useState(false);
  return (
    <div className="menu-wrap">
      <button disabled={disabled} title={title} aria-haspopup="menu" aria-expanded={open} onClick={() => setOpen(!open)}>
        Resume ▾
      </button>
      {open && (
        <div className="menu" role="menu">
          <button
            role="menuitem"
            onClick={() => {
              setOpen(false);
              onResume('load');
            }}
          >
            Resume (load the conversation)
          </button>
          <button
            role="menuitem"
            onClick={() => {
              setOpen(false);
              onResume('fresh');
            }}
          >
            Resume fresh (new conversation)
          </button>
        </div>
      )}
    </div>
  );
}
