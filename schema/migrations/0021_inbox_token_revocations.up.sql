-- DELETE /v1/users/{user_id}/tokens: user tokens of the user issued before
-- not_before are refused (a user logged out everywhere, a leaked token).
CREATE TABLE inbox_token_revocations (
    tenant_id  text        NOT NULL,
    user_id    text        NOT NULL,
    not_before timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, user_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE
);
