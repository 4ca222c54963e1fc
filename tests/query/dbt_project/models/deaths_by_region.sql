{{ config(materialized='view') }}
select r.region, sum(d.deaths) as deaths
from {{ ref('deaths_by_country') }} d join {{ ref('regions') }} r on d.country = r.country
group by r.region
