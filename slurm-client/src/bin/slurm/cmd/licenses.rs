//! `slurm licenses`: licenses slurmctld manages, like `scontrol show licenses`.

use crate::cmd::Context;
use crate::output::{self, emit};
use crate::table::Table;

pub async fn run(ctx: &Context) -> anyhow::Result<()> {
    let client = ctx.client()?;
    let response = client.licenses().await?;
    output::warnings(&response.warnings);
    emit(ctx.output, &response.value, |licenses| {
        let mut t = Table::new(&["LICENSE", "TOTAL", "USED", "FREE", "RESERVED", "REMOTE"]);
        for l in licenses {
            t.row(vec![
                l.name.clone(),
                l.total.to_string(),
                l.used.to_string(),
                l.free.to_string(),
                l.reserved.to_string(),
                if l.remote { "yes" } else { "no" }.into(),
            ]);
        }
        t.render()
    })
}
