{{ config(materialized='table') }}
select country, max(deaths) as deaths from {{ source('covid', 'covid_deaths') }} group by country
