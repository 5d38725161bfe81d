// The dialog that renames a session (an empty name clears it).
import { useState } from 'react';
import { Dialog } from '../Dialog';

export function RenameDialog(props: { current: string; onClose: () => void; onSave: (name: string) => void }) {
  const [name, setName] = useState(props.current);
  return (
    <Dialog title="Rename session" onClose={props.onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          props.onSave(name);
        }}
      >
        <label>
          Name <span className="hint">(empty clears it)</span>
          <input autoFocus value={name} maxLength={200} onChange={(e) => setName(e.target.value)} />
        </label>
        <div className="actions">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button className="primary" type="submit">
            Save
          </button>
        </div>
      </form>
    </Dialog>
  );
}
