-- A field's Backfill step and the Applies of its project no longer run
-- side by side. A step read the project's keys, then wrote their
-- kv_fields rows from their values in later statements, each with a
-- snapshot of its own. A key that an Apply was creating when the step
-- read the keys was not locked by the step, so an Apply could patch it
-- between the step's statements. The step then wrote the key's row from
-- the value before the patch, over the Apply's, and marked the field
-- ready: a scan through the index missed the patched key (found by the
-- e2e test TestScanSeesAcknowledgedPatch under load; reproduced by
-- projection's TestBackfillBesideApplies).
--
-- Now kv_field_indexes_check, which every Apply of a project with
-- declarations calls in its transaction, first takes its declarations'
-- rows FOR SHARE, and a step takes its field's row FOR NO KEY UPDATE
-- before it reads anything (projection.Store.Backfill). So a step waits
-- for the Applies of its project that hold their rows, and an Apply of
-- the project waits for a step, and each sees what the other committed.
-- A lock on a row makes the function volatile.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION kv_field_indexes_check(scopes text[], want_scopes text[], want_fields text[])
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    have_scopes text[];
    have_fields text[];
BEGIN
    PERFORM FROM kv_field_indexes i WHERE i.scope = ANY (scopes) ORDER BY i.scope, i.field FOR SHARE;
    SELECT coalesce(array_agg(i.scope ORDER BY i.scope, i.field), '{}'),
        coalesce(array_agg(i.field ORDER BY i.scope, i.field), '{}')
    INTO have_scopes, have_fields
    FROM kv_field_indexes i WHERE i.scope = ANY (scopes);
    IF have_scopes IS DISTINCT FROM want_scopes OR have_fields IS DISTINCT FROM want_fields THEN
        RAISE EXCEPTION 'kv_field_indexes changed under the projector' USING ERRCODE = 'EK001';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION kv_field_indexes_check(scopes text[], want_scopes text[], want_fields text[])
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    have_scopes text[];
    have_fields text[];
BEGIN
    SELECT coalesce(array_agg(i.scope ORDER BY i.scope, i.field), '{}'),
        coalesce(array_agg(i.field ORDER BY i.scope, i.field), '{}')
    INTO have_scopes, have_fields
    FROM kv_field_indexes i WHERE i.scope = ANY (scopes);
    IF have_scopes IS DISTINCT FROM want_scopes OR have_fields IS DISTINCT FROM want_fields THEN
        RAISE EXCEPTION 'kv_field_indexes changed under the projector' USING ERRCODE = 'EK001';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd
