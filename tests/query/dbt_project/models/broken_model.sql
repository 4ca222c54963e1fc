{{ config(materialized='table', enabled=var('with_broken', false)) }}
-- Fails in the engine (no such column): must leave no table behind.
select country, no_such_column from {{ source('covid', 'covid_deaths') }}
