-- Issue 53: a step's open cards by position. Creating a task counts its step's open cards
-- and a move reads the cards of the steps it touches; without this index each read every
-- task of the workflow (`tasks_by_board` leads with the workflow), so a task's creation got
-- slower as the board grew.
CREATE INDEX tasks_by_step ON tasks(step_id, archived_at, position);
