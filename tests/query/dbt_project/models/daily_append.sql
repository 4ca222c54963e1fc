{{ config(materialized='incremental', incremental_strategy='append') }}
-- The first run loads 2020; each later run appends the days after the newest loaded.
select country, date, deaths from {{ source('covid', 'covid_deaths') }}
where country = 'France' and province_state is null
{% if is_incremental() %}
  and date > (select max(date) from {{ this }}) and date < date '2021-02-01'
{% else %}
  and date < date '2021-01-01'
{% endif %}
