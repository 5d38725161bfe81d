// The "Agent profile" field of every form that picks one (a new session, a new task, an
// attempt, a workflow step): the labelled select over the profiles the page holds.
import { useData } from '../lib/data';

export function ProfileSelect(props: {
  value: string;
  onChange: (id: string) => void;
  /** The form field's name, where a form reads it. */
  name?: string;
  /** A first choice meaning "none" (value ''), e.g. "The task's". */
  none?: string;
}) {
  const { profiles } = useData();
  return (
    <label>
      Agent profile
      <select name={props.name} value={props.value} onChange={(e) => props.onChange(e.target.value)}>
        {props.none !== undefined && <option value="">{props.none}</option>}
        {profiles.map((p) => (
          <option key={p.id} value={p.id}>
            {p.name}
          </option>
        ))}
      </select>
    </label>
  );
}
