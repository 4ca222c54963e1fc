{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partitioned_by=['country']) }}
-- Each run rewrites the partitions it selects (France and Italy), leaving no duplicates.
select date, deaths, country from {{ source('covid', 'covid_deaths') }}
where country in ('France', 'Italy') and province_state is null
  and date >= date '2021-01-01' and date < date '2021-01-08'
