//! The HTTP service's work, free of HTTP: pricing a list of orders, and
//! building the product catalog. Both parse or build JSON-shaped values
//! whose every string is a heap allocation, as a real service's are.
//!
//! Everything is deterministic, so every allocator serves the same bytes.

use serde::{Deserialize, Serialize};

/// Orders in the request body the load generator sends.
pub const ORDERS_PER_REQUEST: usize = 40;
/// Items in every catalog response.
pub const CATALOG_ITEMS: usize = 200;

/// `POST /orders`: a customer's orders to price.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct OrderRequest {
    /// Who orders.
    pub customer: String,
    /// ISO currency code.
    pub currency: String,
    /// The order lines.
    pub orders: Vec<Order>,
}

/// One order line.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Order {
    /// Stock-keeping unit.
    pub sku: String,
    /// Units.
    pub quantity: u32,
    /// Price of one unit, in cents.
    pub unit_price_cents: u64,
    /// Labels such as `promo`.
    pub tags: Vec<String>,
    /// Free text, if any.
    pub note: Option<String>,
}

/// The answer to `POST /orders`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Quote {
    /// Who ordered.
    pub customer: String,
    /// ISO currency code.
    pub currency: String,
    /// One line per order.
    pub lines: Vec<QuoteLine>,
    /// Sum of the lines before discounts.
    pub subtotal_cents: u64,
    /// Sum of the discounts.
    pub discount_cents: u64,
    /// Tax on the discounted subtotal.
    pub tax_cents: u64,
    /// What the customer pays.
    pub total_cents: u64,
}

/// One priced line.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct QuoteLine {
    /// Stock-keeping unit.
    pub sku: String,
    /// Units.
    pub quantity: u32,
    /// Quantity × unit price.
    pub line_cents: u64,
    /// Discount on this line.
    pub discount_cents: u64,
    /// The order's tags, upper-cased, and the discounts applied.
    pub labels: Vec<String>,
}

/// One catalog entry.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Item {
    /// Item number.
    pub id: u32,
    /// Stock-keeping unit.
    pub sku: String,
    /// Display name.
    pub name: String,
    /// A sentence or two.
    pub description: String,
    /// Price in cents.
    pub price_cents: u64,
    /// Units in stock.
    pub stock: u32,
    /// Labels.
    pub tags: Vec<String>,
}

/// The answer to `GET /catalog`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Catalog {
    /// Items in this response.
    pub count: usize,
    /// The items.
    pub items: Vec<Item>,
}

const TAGS: [&str; 6] = ["promo", "fragile", "bulk", "new", "eco", "gift"];
const WORDS: [&str; 8] = [
    "steel", "walnut", "linen", "copper", "basalt", "cedar", "wool", "glass",
];

/// Prices `request`: 5 % off lines of 10 units or more, 2 % more off
/// lines tagged `promo`, 20 % tax on the discounted subtotal.
pub fn price(request: &OrderRequest) -> Quote {
    let mut lines = Vec::with_capacity(request.orders.len());
    let (mut subtotal, mut discount) = (0u64, 0u64);
    for order in &request.orders {
        let line_cents = u64::from(order.quantity) * order.unit_price_cents;
        let mut labels: Vec<String> = order.tags.iter().map(|t| t.to_uppercase()).collect();
        let mut percent = 0;
        if order.quantity >= 10 {
            percent += 5;
            labels.push(format!("VOLUME-{}", order.quantity));
        }
        if order.tags.iter().any(|t| t == "promo") {
            percent += 2;
            labels.push("PROMO-2".to_owned());
        }
        let line_discount = line_cents * percent / 100;
        subtotal += line_cents;
        discount += line_discount;
        lines.push(QuoteLine {
            sku: order.sku.clone(),
            quantity: order.quantity,
            line_cents,
            discount_cents: line_discount,
            labels,
        });
    }
    let tax = (subtotal - discount) / 5;
    Quote {
        customer: request.customer.clone(),
        currency: request.currency.clone(),
        lines,
        subtotal_cents: subtotal,
        discount_cents: discount,
        tax_cents: tax,
        total_cents: subtotal - discount + tax,
    }
}

/// The request body the load generator posts.
pub fn order_request() -> OrderRequest {
    OrderRequest {
        customer: "customer-0042 (Ada Lovelace, Analytical Engines Ltd)".to_owned(),
        currency: "EUR".to_owned(),
        orders: (0..ORDERS_PER_REQUEST as u32)
            .map(|i| Order {
                sku: format!("SKU-{:06}", 1000 + i * 37),
                quantity: 1 + (i * 7) % 24,
                unit_price_cents: 199 + u64::from(i) * 1250,
                tags: (0..(i % 4) as usize)
                    .map(|t| TAGS[(i as usize + t) % TAGS.len()].to_owned())
                    .collect(),
                note: (i % 3 == 0).then(|| format!("deliver to dock {} before noon", i % 9)),
            })
            .collect(),
    }
}

/// The catalog, built anew for every request.
pub fn catalog() -> Catalog {
    let items: Vec<Item> = (0..CATALOG_ITEMS as u32)
        .map(|id| {
            let word = WORDS[id as usize % WORDS.len()];
            let other = WORDS[(id as usize * 3 + 1) % WORDS.len()];
            Item {
                id,
                sku: format!("SKU-{:06}", 1000 + id * 37),
                name: format!("{word} {other} item {id}"),
                description: format!(
                    "A {word} thing with a {other} finish, number {id} of the range; \
                     ships in {} days.",
                    1 + id % 5
                ),
                price_cents: 99 + u64::from(id) * 313 % 100_000,
                stock: (id * 17) % 250,
                tags: (0..1 + (id % 3) as usize)
                    .map(|t| TAGS[(id as usize + t) % TAGS.len()].to_owned())
                    .collect(),
            }
        })
        .collect();
    Catalog {
        count: items.len(),
        items,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_the_standard_request() {
        let quote = price(&order_request());
        assert_eq!(quote.lines.len(), ORDERS_PER_REQUEST);
        assert_eq!(
            quote.total_cents,
            quote.subtotal_cents - quote.discount_cents + quote.tax_cents
        );
        assert!(quote.discount_cents > 0);
        let body = serde_json::to_string(&order_request()).unwrap();
        assert!(body.len() > 1024, "the body spans more than 1 KiB");
        assert!(!body.contains("]==]"), "the body fits a Lua long string");
    }

    #[test]
    fn catalog_has_every_item() {
        let catalog = catalog();
        assert_eq!(catalog.count, CATALOG_ITEMS);
        assert_eq!(catalog.items.len(), CATALOG_ITEMS);
        assert!(serde_json::to_vec(&catalog).unwrap().len() > 20_000);
    }
}
