-- Actions that finish or leave a trace (issue 31, item 2): a revert or an accept writes an
-- `attempted` entry before it acts, and its outcome names that entry in `attempt`. An attempt
-- has at most one outcome (the unique index: the outcome written by the action and the
-- `interrupted` written by a later start for a killed process cannot both land). The partial
-- index finds the attempts not yet closed.
ALTER TABLE audit ADD COLUMN attempt BIGINT;
CREATE UNIQUE INDEX audit_attempt ON audit (attempt);
CREATE INDEX audit_attempted ON audit (id) WHERE status = 'attempted';
