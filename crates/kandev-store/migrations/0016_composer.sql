-- Issue 18 (composer): attachments kept on queued prompts ([{id, name, mime, size}] as JSON;
-- the files live under $KANDEV_HOME/attachments/<sha256>), the agent's slash commands per
-- session (its latest `available_commands_update`, [{name, description, input_hint}] as
-- JSON), and the token usage the agent reported for each turn ({used, size, cost} as JSON).

ALTER TABLE queued_prompts ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]';
ALTER TABLE sessions ADD COLUMN available_commands TEXT NOT NULL DEFAULT '[]';
ALTER TABLE turns ADD COLUMN usage TEXT;
