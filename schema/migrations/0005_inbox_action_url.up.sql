-- In-app templates may link somewhere; the inbox keeps the rendered link.
ALTER TABLE inbox ADD COLUMN action_url text;
