-- The seed's COVID-19 dataset: confirmed, deaths and recovered per country and day,
-- with the country's coordinates, for the countries of interest.
--
-- Athena SQL, run through the SQL service on the demo_hive_metastore catalog.
-- Provinces are summed into their country; a country's point is the one JHU gives
-- the country as a whole (its row without a province). `date` is text (yyyy-MM-dd):
-- the dataset converts it to a date, as an analyst would in the BI tool.
SELECT
    c.country,
    max(CASE WHEN c.province_state IS NULL THEN c.lat END) AS lat,
    max(CASE WHEN c.province_state IS NULL THEN c.lon END) AS lon,
    CAST(c."date" AS varchar) AS "date",
    CAST(sum(c.confirmed) AS bigint) AS confirmed,
    CAST(sum(c.deaths) AS bigint) AS deaths,
    CAST(sum(c.recovered) AS bigint) AS recovered
FROM covid_cases AS c
WHERE c.country IN (
    'US', 'Italy', 'India', 'Brazil', 'Spain', 'United Kingdom',
    'France', 'Germany', 'Russia', 'Mexico', 'Peru', 'South Africa'
)
GROUP BY c.country, c."date"
ORDER BY c.country, c."date"
