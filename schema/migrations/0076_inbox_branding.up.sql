-- Tenant branding for the hosted preference centre (api/preference_centre.go,
-- docs/preference-centre.md): a display name, an accent colour (#rrggbb) and a
-- logo URL (https), set with PUT /v1/inbox/settings `branding` and validated
-- there (store.PutInboxBranding). NULL: Herald's neutral defaults.
ALTER TABLE inbox_settings
    ADD COLUMN brand_name text,
    ADD COLUMN brand_color text,
    ADD COLUMN brand_logo_url text;
